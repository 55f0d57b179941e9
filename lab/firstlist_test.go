package lab

import (
	"slices"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/discovery"
	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
)

// TestFirstListAfterStartAsksNoAgent: the lab's wait for a sidecar pod to be ready reads
// its agent's status, and the first pod list after Start (`meshlab status`, `get pods`,
// the dashboard) answers from it, asking no agent; an event that names the pod then
// makes the next list ask its agent once. The first list used to ask every agent (the
// lab's own pod.ready, published after its wait, dropped what the wait read): 9 s for
// the first `meshlab status` of a 500-pod lab, against 0.4-0.6 s for the later ones.
func TestFirstListAfterStartAsksNoAgent(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	l, _, err := startOnRecorder(t, rec, "st6", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	waited := rec.askedAgents()
	if !slices.ContainsFunc(waited, func(s string) bool { return strings.HasPrefix(s, "web "+agentapi.PathStatus+"?wait=ready") }) {
		t.Fatalf("Start asked the agents %q, want web's ready wait", waited)
	}

	list := func() []string {
		t.Helper()
		pods, err := l.Pods(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(pods, func(p api.PodStatus) bool { return p.Key == "web" })
		if i < 0 || !pods[i].Ready || pods[i].Epoch != 0 || pods[i].DataPlane != agentapi.DataPlaneMeshlabProxy || pods[i].Message != "" {
			t.Fatalf("pods %+v, want web ready on epoch 0 of meshlab-proxy", pods)
		}
		return rec.askedAgents()
	}
	if asked := list(); len(asked) != 0 {
		t.Errorf("the first list after Start asked the agents %q, want none: the ready wait read web's status", asked)
	}
	l.publish(discovery.EventDisconnected, "web", "", nil) // its proxy's stream closed
	if asked := list(); !slices.Equal(asked, []string{"web " + agentapi.PathStatus}) {
		t.Errorf("the list after web's stream closed asked the agents %q, want web's status once", asked)
	}
	if asked := list(); len(asked) != 0 {
		t.Errorf("the list after that asked the agents %q, want none", asked)
	}
}
