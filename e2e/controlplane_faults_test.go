package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/internal/testutil"
)

// TestControlPlaneFaultsAndHistory breaks the control plane of one hello lab in turn
// (issue 9): a held push makes a proxy STALE until cleared; the config history and diff
// show the VirtualService applied meanwhile; a forced NACK shows in proxy-status with
// the proxy's error while traffic still flows; a stopped discovery server leaves traffic
// flowing and the proxies reconnect. Bad fault requests are refused with the valid names.
func TestControlPlaneFaultsAndHistory(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t)
	ml := func(args ...string) (string, error) {
		return meshlab(t, append([]string{"--name", l.name}, args...)...)
	}
	mustML := func(args ...string) string {
		t.Helper()
		out, err := ml(args...)
		if err != nil {
			t.Fatalf("meshlab %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	// proxyLine polls proxy-status until the line of pod satisfies cond.
	proxyLine := func(pod, what string, cond func(line, all string) bool) string {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		var out string
		for time.Now().Before(deadline) {
			out, _ = ml("proxy-status")
			for _, line := range strings.Split(out, "\n") {
				if strings.HasPrefix(line, pod+".") && cond(line, out) {
					return line
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("proxy-status: %s did not happen within 20s; last:\n%s", what, out)
		return ""
	}
	curl := func(when string) {
		t.Helper()
		out, err := ml("exec", "frontend-v1", "--", "curl", "-sS", "--max-time", "5", "http://backend:8080/")
		if err != nil || !strings.Contains(out, "backend") {
			t.Fatalf("%s: request failed: %v\n%s", when, err, out)
		}
	}

	// Bad input.
	if out, err := ml("fault", "add", "hold-push", "nosuch"); err == nil || !strings.Contains(out, "frontend-v1") {
		t.Errorf("fault on an unknown pod: err=%v output %q; want a refusal listing the pods", err, out)
	}
	if out, err := ml("fault", "add", "explode", "frontend-v1"); err == nil || !strings.Contains(out, "hold-push") {
		t.Errorf("unknown fault kind: err=%v output %q; want a refusal listing the kinds", err, out)
	}

	// hold-push: STALE while held, SYNCED after clear.
	out := mustML("fault", "add", "hold-push", "frontend-v1")
	if !strings.Contains(out, "fault f1 added") {
		t.Fatalf("fault add: %q, want fault f1 added", out)
	}
	if out, err := ml("fault", "add", "hold-push", "frontend-v1"); err == nil || !strings.Contains(out, "already in force") {
		t.Errorf("second hold-push: err=%v output %q; want a refusal", err, out)
	}
	if out := mustML("fault", "list"); !strings.Contains(out, "hold-push") {
		t.Errorf("fault list = %q, want the hold-push", out)
	}
	vs := filepath.Join(t.TempDir(), "vs.yaml")
	if err := os.WriteFile(vs, []byte(`apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: backend, namespace: default}
spec:
  hosts: [backend]
  http:
  - timeout: 3s
    route:
    - destination: {host: backend}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	mustML("apply", "-f", vs)
	proxyLine("frontend-v1", "STALE while pushes are held", func(line, _ string) bool { return strings.Contains(line, "STALE") })
	curl("while pushes are held")
	mustML("fault", "clear", "f1")
	proxyLine("frontend-v1", "SYNCED after clear", func(line, _ string) bool {
		return !strings.Contains(line, "STALE") && strings.Count(line, "SYNCED") == 4
	})

	// history and diff show the applied VirtualService's route.
	var h api.PodHistory
	if err := json.Unmarshal([]byte(mustML("history", "frontend-v1", "-o", "json")), &h); err != nil {
		t.Fatal(err)
	}
	if n := len(h.Snapshots); n < 2 || !strings.Contains(h.Snapshots[n-1].Trigger, "VirtualService default/backend") {
		t.Fatalf("history = %+v, want the apply of VirtualService default/backend last", h)
	}
	from, to := h.Snapshots[len(h.Snapshots)-2].Version, h.Snapshots[len(h.Snapshots)-1].Version
	if text := mustML("history", "frontend-v1"); !strings.Contains(text, "ACK/") || !strings.Contains(text, to) {
		t.Errorf("history text lacks ACKs or version %s:\n%s", to, text)
	}
	diff := mustML("diff", "frontend-v1", from, to)
	t.Logf("diff:\n%s", diff)
	if !strings.Contains(diff, "RDS") || !strings.Contains(diff, "route.timeout") || !strings.Contains(diff, `"3s"`) {
		t.Errorf("diff %s %s lacks the route timeout change:\n%s", from, to, diff)
	}
	if out, err := ml("diff", "frontend-v1", "v0", to); err == nil || !strings.Contains(out, "unknown") {
		t.Errorf("diff of an unknown version: err=%v output %q", err, out)
	}

	// nack: NACK with the proxy's error, traffic unaffected, SYNCED after clear. As in
	// Envoy, only the fault's listener is refused (the response's other listeners apply)
	// and the NACK names it in LdsApiImpl's wording.
	out = mustML("fault", "add", "nack", "frontend-v1")
	id := strings.Fields(out)[1]
	proxyLine("frontend-v1", "NACK", func(line, all string) bool {
		return strings.Contains(line, "NACK") &&
			strings.Contains(all, "NACK frontend-v1.default LDS: Error adding/updating listener(s) meshlab-fault-nack: ")
	})
	curl("while the proxy NACKs")
	mustML("fault", "clear", id)
	proxyLine("frontend-v1", "SYNCED after the nack is cleared", func(line, _ string) bool { return strings.Count(line, "SYNCED") == 4 })

	// discovery-stop: traffic keeps flowing, the proxies reconnect.
	mustML("fault", "add", "discovery-stop", "--duration", "2s")
	proxyLine("frontend-v1", "disconnected", func(line, _ string) bool { return strings.HasSuffix(strings.TrimSpace(line), "false") })
	curl("while discovery is stopped")
	proxyLine("frontend-v1", "reconnected", func(line, _ string) bool { return strings.HasSuffix(strings.TrimSpace(line), "true") })
	curl("after discovery is back")
	if out := mustML("fault", "list"); !strings.Contains(out, "no fault") {
		t.Errorf("fault list after the stop ended = %q, want none", out)
	}

	// kill-proxy and kill-agent: one-shot, the pod recovers.
	if out := mustML("fault", "add", "kill-proxy", "backend-v1"); !strings.Contains(out, "killed proxy epoch 0") {
		t.Errorf("kill-proxy: %q", out)
	}
	if out := mustML("fault", "add", "kill-agent", "backend-v2"); !strings.Contains(out, "killed agent (pid") {
		t.Errorf("kill-agent: %q", out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := ml("exec", "frontend-v1", "--", "curl", "-sS", "--max-time", "2", "http://backend:8080/")
		if err == nil && strings.Contains(out, "backend") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("backend not served 30s after kill-proxy and kill-agent: %v\n%s\n%s", err, out, mustML("status"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	proxyLine("backend-v1", "backend-v1 reconnected and synced", func(line, _ string) bool { return strings.Count(line, "SYNCED") == 4 })

	// ca-clock is listed until cleared.
	mustML("fault", "ca-clock", "--offset", "-25h")
	if out := mustML("fault", "list"); !strings.Contains(out, "ca-clock") || !strings.Contains(out, "offset -25h") {
		t.Errorf("fault list = %q, want the ca-clock offset", out)
	}
	if out := mustML("fault", "clear"); !strings.Contains(out, "ca-clock") {
		t.Errorf("fault clear = %q, want the ca-clock cleared", out)
	}
}
