package lab

import (
	"context"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/web"
)

// istiodDebugTimeout bounds one read of istiod's debug endpoints (a config_dump of a big
// lab takes a while on a loaded machine).
const istiodDebugTimeout = 30 * time.Second

// istiodView is the lab's web.IstiodDebugger: istiod's own debug endpoints, read over its
// feed socket (lab/istiodcp), when istiod is the lab's control plane.
type istiodView struct{ l *Lab }

var _ web.IstiodDebugger = istiodView{}

func (v istiodView) IstiodDebug(ctx context.Context, endpoint, query string) ([]byte, error) {
	d := v.l.istiod
	if d == nil {
		return nil, api.ErrNoIstiod
	}
	if err := d.Exited(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, istiodDebugTimeout)
	defer cancel()
	path := "/debug/" + endpoint
	if query != "" {
		path += "?" + query
	}
	return d.Debug(ctx, path)
}

// controlPlaneInfo fills info's control plane: meshlab's generator, or istiod with its
// version and whether it still runs.
func controlPlaneInfo(l *Lab, info *api.LabInfo) {
	info.ControlPlane = l.rec.ControlPlane
	if info.ControlPlane == "" {
		info.ControlPlane = "meshlab"
	}
	if l.istiod == nil {
		return
	}
	info.ControlPlaneVersion = l.rec.IstiodVersion
	if err := l.istiod.Exited(); err != nil {
		info.ControlPlaneError = err.Error()
	} else if err := l.istiod.Refused(); err != nil {
		info.ControlPlaneRefused = err.Error()
	}
}

// recordIstiodPID records a restarted istiod's process id, which version reads its build
// from.
func recordIstiodPID(l *Lab, pid int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rec == nil {
		return
	}
	l.rec.IstiodPID = pid
	if err := writeRecord(l.paths.Record(), l.rec); err != nil {
		l.log.Warn("lab record not updated", "err", err)
	}
}
