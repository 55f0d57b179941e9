package lab

import (
	"strings"
	"testing"
)

func TestPolicyAppliedEvent(t *testing.T) {
	l := &Lab{bus: NewBus(16)}
	l.publish("config.created", "", "PeerAuthentication default/strict", map[string]any{"kind": "PeerAuthentication", "namespace": "default", "name": "strict"})
	l.publish("config.deleted", "", "AuthorizationPolicy default/deny", map[string]any{"kind": "AuthorizationPolicy", "namespace": "default", "name": "deny"})
	l.publish("config.created", "", "VirtualService default/vs", map[string]any{"kind": "VirtualService", "namespace": "default", "name": "vs"})
	var got []string
	for _, e := range l.bus.Recent() {
		got = append(got, e.Kind+": "+e.Message)
		if e.Kind == EventPolicyApplied && (e.Fields["name"] == nil || e.Fields["action"] == nil) {
			t.Errorf("policy event fields = %v", e.Fields)
		}
	}
	want := []string{
		"config.created: PeerAuthentication default/strict",
		"policy.applied: PeerAuthentication default/strict created",
		"config.deleted: AuthorizationPolicy default/deny",
		"policy.applied: AuthorizationPolicy default/deny deleted",
		"config.created: VirtualService default/vs",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
