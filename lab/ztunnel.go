package lab

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/lab/ambient"
)

// ztunnelAdminTimeout bounds one read of ztunnel's admin.
const ztunnelAdminTimeout = 10 * time.Second

// ztunnelAdmin is the lab's web.ZtunnelAdmin: ztunnel's admin (127.0.0.1:15000) reached
// inside ztunnel's network namespace through lab/ambient. A lab with no pod in ambient mode
// and no ztunnel connected to its node agent has no ztunnel to ask: api.ErrNoZtunnel.
type ztunnelAdmin struct{ l *Lab }

func (z ztunnelAdmin) ZtunnelAdminGet(ctx context.Context, path string) ([]byte, error) {
	l := z.l
	if l.ambient == nil {
		return nil, api.ErrNoZtunnel
	}
	if !l.ambient.Connected() && !hasAmbientPod(l) {
		return nil, api.ErrNoZtunnel
	}
	ctx, cancel := context.WithTimeout(ctx, ztunnelAdminTimeout)
	defer cancel()
	body, err := ambient.AdminGet(ctx, NamespaceName(l.opts.Name, ztunnelKey(l)), path)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	b, err := io.ReadAll(io.LimitReader(body, api.MaxAnswerBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s from ztunnel's admin: %w", path, err)
	}
	if len(b) > api.MaxAnswerBytes {
		return nil, fmt.Errorf("read %s from ztunnel's admin: larger than %d bytes", path, api.MaxAnswerBytes)
	}
	return b, nil
}

// hasAmbientPod reports whether a pod of the lab's model is in ambient mode.
func hasAmbientPod(l *Lab) bool {
	l.mu.Lock()
	m := l.model
	l.mu.Unlock()
	if m == nil {
		return false
	}
	for _, p := range m.Pods {
		if model.DataplaneMode(m, p) == model.DataplaneAmbient {
			return true
		}
	}
	return false
}
