package lab

import (
	"strings"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/lab/observe"
)

// Security event kinds: policies applied and workload certificates seen changing.
const (
	// EventPolicyApplied follows a config.<action> event of a PeerAuthentication or an
	// AuthorizationPolicy (Fields: kind, namespace, name, action).
	EventPolicyApplied = "policy.applied"
	// EventCertIssued and EventCertRotated report a pod's agent getting its first
	// certificate and replacing it (Fields: serial, notAfter, rotations); they are seen
	// by the topology poll, so while the dashboard watches, like epoch.state.
	EventCertIssued  = observe.EventCertIssued
	EventCertRotated = observe.EventCertRotated
)

// policyKinds are the config kinds whose changes are also published as policy.applied.
var policyKinds = map[string]bool{"PeerAuthentication": true, "AuthorizationPolicy": true}

// policyEvent returns the policy.applied event that goes with a config.<action> event,
// and whether there is one.
func policyEvent(kind, msg string, fields map[string]any) (api.Event, bool) {
	action, ok := strings.CutPrefix(kind, "config.")
	if !ok {
		return api.Event{}, false
	}
	k, _ := fields["kind"].(string)
	if !policyKinds[k] {
		return api.Event{}, false
	}
	f := map[string]any{"action": action}
	for _, key := range []string{"kind", "namespace", "name"} {
		f[key] = fields[key]
	}
	return api.Event{Kind: EventPolicyApplied, Message: msg + " " + action, Fields: f}, true
}
