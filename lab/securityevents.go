package lab

import (
	"strings"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/web"
)

// Security event kinds: policies applied and workload certificates seen changing.
const (
	// EventPolicyApplied follows a config.<action> event of a PeerAuthentication or an
	// AuthorizationPolicy (Fields: kind, namespace, name, action).
	EventPolicyApplied = "policy.applied"
	// EventCertIssued and EventCertRotated report a pod's agent getting its first
	// certificate and replacing it (Fields: serial, notAfter, rotations); they are seen
	// by the topology poll, so while the dashboard watches, like epoch.state.
	EventCertIssued  = "cert.issued"
	EventCertRotated = "cert.rotated"
)

// policyKinds are the config kinds whose changes are also published as policy.applied.
var policyKinds = map[string]bool{"PeerAuthentication": true, "AuthorizationPolicy": true}

// policyEvent returns the policy.applied event that goes with a config.<action> event,
// and whether there is one.
func policyEvent(kind, msg string, fields map[string]any) (web.Event, bool) {
	action, ok := strings.CutPrefix(kind, "config.")
	if !ok {
		return web.Event{}, false
	}
	k, _ := fields["kind"].(string)
	if !policyKinds[k] {
		return web.Event{}, false
	}
	f := map[string]any{"action": action}
	for _, key := range []string{"kind", "namespace", "name"} {
		f[key] = fields[key]
	}
	return web.Event{Kind: EventPolicyApplied, Message: msg + " " + action, Fields: f}, true
}

// publishCertChanges publishes cert.issued for a pod whose agent has its first
// certificate and cert.rotated for one whose serial changed since the previous sample
// (the first sample only records).
func (l *Lab) publishCertChanges(m *model.Model, samples []podSample) {
	p := &l.topo
	p.mu.Lock()
	defer p.mu.Unlock()
	first := p.serials == nil
	if first {
		p.serials = map[string]string{}
	}
	for i, pod := range m.Pods {
		st := samples[i].status
		if st == nil || st.Cert == nil || st.Cert.Serial == "" {
			continue
		}
		c := st.Cert
		old, seen := p.serials[pod.Name]
		if old == c.Serial {
			continue
		}
		p.serials[pod.Name] = c.Serial
		if first {
			continue
		}
		fields := map[string]any{"serial": c.Serial, "notAfter": c.NotAfter, "rotations": c.Rotations, "spiffeID": c.SPIFFEID}
		if !seen || old == "" {
			l.publish(EventCertIssued, pod.Name, "certificate "+c.Serial+" issued for "+c.SPIFFEID, fields)
			continue
		}
		fields["previous"] = old
		l.publish(EventCertRotated, pod.Name, "certificate rotated: "+old+" -> "+c.Serial, fields)
	}
}
