package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// raceScenario has two pods whose demo app calls the backend once as it starts: "early"
// starts its app right away (holdApplicationUntilProxyStarts false, Istio's default),
// "held" only once its sidecar is ready. The backend has no sidecar, so it serves as
// soon as its pod exists: whatever fails is the caller's side of the race.
const raceScenario = `apiVersion: v1
kind: Service
metadata: {name: backend, namespace: default}
spec:
  selector: {app: backend}
  ports: [{name: http, port: 8080}]
---
apiVersion: meshlab.dev/v1alpha1
kind: Workload
metadata: {name: backend, namespace: default}
spec:
  labels: {app: backend}
  ports: [8080]
  app: {}
  sidecar: {inject: false}
---
apiVersion: meshlab.dev/v1alpha1
kind: Workload
metadata: {name: early, namespace: default}
spec:
  labels: {app: early}
  ports: [8080]
  app: {startupCalls: ["http://backend:8080/"]}
---
apiVersion: meshlab.dev/v1alpha1
kind: Workload
metadata: {name: held, namespace: default}
spec:
  labels: {app: held}
  ports: [8080]
  app: {startupCalls: ["http://backend:8080/"]}
  sidecar: {holdApplicationUntilProxyStarts: true}
`

// TestAppStartupRace shows the race holdApplicationUntilProxyStarts exists for: the app
// that starts with its sidecar calls out before the proxy has its listeners and fails
// (its connection is captured to a proxy that is not serving yet, or the name does not
// resolve yet); the app that waits for the proxy succeeds.
func TestAppStartupRace(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	file := filepath.Join(t.TempDir(), "race.yaml")
	if err := os.WriteFile(file, []byte(raceScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	l := startLab(t, file)
	type call struct {
		URL    string          `json:"url"`
		Status int             `json:"status"`
		Body   json.RawMessage `json:"body"`
		Error  string          `json:"error"`
	}
	startup := func(pod string) []call {
		t.Helper()
		out, err := meshlab(t, "exec", "--name", l.name, pod, "--", "curl", "-sS", "-m", "5", "http://127.0.0.1:8080/x")
		if err != nil {
			t.Fatalf("curl the %s app: %v\n%s", pod, err, out)
		}
		var answer struct {
			Startup []call `json:"startup"`
		}
		if err := json.Unmarshal([]byte(out), &answer); err != nil {
			t.Fatalf("decode the %s app's answer: %v\n%s", pod, err, out)
		}
		return answer.Startup
	}
	early := startup("early")
	if len(early) != 1 || early[0].Error == "" || early[0].Status != 0 {
		t.Errorf("early app's startup call = %+v, want a failure (it raced its sidecar)", early)
	} else {
		t.Logf("early app's startup call failed as expected: %s", early[0].Error)
	}
	held := startup("held")
	if len(held) != 1 || held[0].Error != "" || held[0].Status != 200 || !strings.Contains(string(held[0].Body), `"service":"backend"`) {
		t.Errorf("held app's startup call = %+v, want 200 from the backend", held)
	}
}
