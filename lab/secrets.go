package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
	"github.com/meshlab/meshlab/web"
)

var _ web.ProxySecretsReader = (*Lab)(nil)

// ProxySecrets implements web.ProxySecretsReader: each sidecar's dynamic_active_secrets
// from its proxy's /config_dump, read through the pod's agent, all pods at once.
func (l *Lab) ProxySecrets(ctx context.Context) []api.PodSecrets {
	l.mu.Lock()
	m := l.model
	l.mu.Unlock()
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		out []api.PodSecrets
	)
	for _, p := range m.Pods {
		if !p.Sidecar.Inject {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ps := api.PodSecrets{Pod: p.Key()}
			secrets, err := proxySecrets(ctx, l.paths.AgentSocket(p.Key()))
			if err != nil {
				ps.Error = err.Error()
			}
			ps.Secrets = secrets
			mu.Lock()
			out = append(out, ps)
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.SortFunc(out, func(a, b api.PodSecrets) int { return strings.Compare(a.Pod, b.Pod) })
	return out
}

// secretsDump is the part of /config_dump?resource=dynamic_active_secrets read here
// (envoy.admin.v3.SecretsConfigDump.DynamicSecret, in the admin API's JSON).
type secretsDump struct {
	Configs []struct {
		Name        string    `json:"name"`
		VersionInfo string    `json:"version_info"`
		LastUpdated time.Time `json:"last_updated"`
		Secret      struct {
			TLSCertificate    json.RawMessage `json:"tls_certificate"`
			ValidationContext json.RawMessage `json:"validation_context"`
		} `json:"secret"`
	} `json:"configs"`
}

// proxySecrets reads one proxy's active secrets through the agent at sock.
func proxySecrets(ctx context.Context, sock string) ([]api.ProxySecret, error) {
	c := agentapi.NewClient(sock)
	defer c.Close()
	body, err := c.Admin(ctx, "config_dump?resource=dynamic_active_secrets")
	if err != nil {
		return nil, fmt.Errorf("read the proxy's secrets: %w", err)
	}
	defer body.Close()
	var d secretsDump
	if err := json.NewDecoder(body).Decode(&d); err != nil {
		return nil, fmt.Errorf("decode the proxy's secrets: %w", err)
	}
	out := make([]api.ProxySecret, 0, len(d.Configs))
	for _, s := range d.Configs {
		kind := ""
		switch {
		case len(s.Secret.TLSCertificate) > 0:
			kind = "certificate"
		case len(s.Secret.ValidationContext) > 0:
			kind = "validation"
		}
		out = append(out, api.ProxySecret{Name: s.Name, Kind: kind, Version: s.VersionInfo, LastUpdated: s.LastUpdated})
	}
	return out, nil
}
