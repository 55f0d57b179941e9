package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// istiodBin returns bin/meshlab-istiod (`make istiod`; `make test` builds it before the
// end-to-end tests), skipping the test when it is not built, unless in CI.
func istiodBin(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("../bin/meshlab-istiod")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not built (make istiod): %v", p, err)
		}
		t.Skipf("%s is not built: run `make istiod` (%v)", p, err)
	}
	return p
}

// TestIstiodControlPlane runs the hello lab with Istio's own istiod generating every
// proxy's config: requests flow through both sidecars, a VirtualService applied changes
// routing (istiod sees it as a watch event), and proxy-status shows every proxy SYNCED on
// what istiod sent, relayed by the lab.
func TestIstiodControlPlane(t *testing.T) {
	testutil.RequireRoot(t)
	bin := istiodBin(t)
	t.Parallel()
	l := startLabWithin(t, 3*time.Minute, "--control-plane=istiod", "--istiod-path", bin)
	if !strings.Contains(l.out.String(), "control plane: istiod ") {
		t.Errorf("up did not say istiod is the control plane:\n%s", l.out.String())
	}
	ml := func(args ...string) (string, error) {
		return meshlab(t, append([]string{"--name", l.name}, args...)...)
	}
	backendOf := func() (string, error) {
		out, err := ml("exec", "frontend-v1", "--", "curl", "-sS", "--max-time", "5", "http://backend:8080/")
		if err != nil {
			return "", err
		}
		var resp struct {
			Pod string `json:"pod"`
		}
		if err := json.Unmarshal([]byte(out), &resp); err != nil {
			return "", err
		}
		return resp.Pod, nil
	}
	// istiod's first pushes may still be settling when the pods are ready.
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := backendOf()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no request through istiod's config succeeded within 20s of up: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	seen := map[string]int{}
	for i := 0; i < 20; i++ {
		pod, err := backendOf()
		if err != nil {
			t.Fatalf("request %d through istiod's config: %v", i, err)
		}
		seen[pod]++
	}
	if seen["backend-v1"] == 0 || seen["backend-v2"] == 0 {
		t.Errorf("answers by pod %v; want both backends (istiod's round robin)", seen)
	}

	vs := filepath.Join(t.TempDir(), "v2.yaml")
	if err := os.WriteFile(vs, []byte(`apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: backend}
spec:
  host: backend
  subsets:
  - {name: v1, labels: {version: v1}}
  - {name: v2, labels: {version: v2}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: backend}
spec:
  hosts: [backend]
  http:
  - route:
    - destination: {host: backend, subset: v2}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := ml("apply", "-f", vs); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	deadline = time.Now().Add(20 * time.Second)
	streak := 0
	for streak < 10 {
		if time.Now().After(deadline) {
			t.Fatalf("requests did not all go to backend-v2 within 20s of the VirtualService")
		}
		pod, err := backendOf()
		if err == nil && pod == "backend-v2" {
			streak++
		} else {
			streak = 0
		}
	}

	var ps string
	deadline = time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		ps, _ = ml("proxy-status")
		if strings.Count(ps, "SYNCED") > 0 && !strings.Contains(ps, "STALE") && !strings.Contains(ps, "NACK") &&
			strings.Contains(ps, "frontend-v1") && strings.Contains(ps, "backend-v2") {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, pod := range []string{"frontend-v1", "backend-v1", "backend-v2"} {
		line := ""
		for _, l := range strings.Split(ps, "\n") {
			if strings.HasPrefix(l, pod+".") {
				line = l
			}
		}
		if !strings.Contains(line, "SYNCED") || strings.Contains(line, "STALE") || strings.Contains(line, "NACK") {
			t.Errorf("proxy-status of %s: %q; want SYNCED on what istiod sent\n%s", pod, line, ps)
		}
	}
}
