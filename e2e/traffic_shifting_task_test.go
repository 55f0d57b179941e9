package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// trafficShiftingV1 is the DestinationRule the task applies first (destination-rule-all:
// reviews' subsets), with the VirtualService of virtual-service-all-v1 for reviews.
const trafficShiftingV1 = `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: reviews
spec:
  host: reviews
  subsets:
  - name: v1
    labels:
      version: v1
  - name: v2
    labels:
      version: v2
  - name: v3
    labels:
      version: v3
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: reviews
spec:
  hosts:
  - reviews
  http:
  - route:
    - destination:
        host: reviews
        subset: v1
`

// trafficShifting50 is virtual-service-reviews-50-v3: half of reviews' traffic to v3.
const trafficShifting50 = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: reviews
spec:
  hosts:
  - reviews
  http:
  - route:
    - destination:
        host: reviews
        subset: v1
      weight: 50
    - destination:
        host: reviews
        subset: v3
      weight: 50
`

// trafficShiftingV3 is virtual-service-reviews-v3: all of it to v3.
const trafficShiftingV3 = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: reviews
spec:
  hosts:
  - reviews
  http:
  - route:
    - destination:
        host: reviews
        subset: v3
`

// TestTrafficShiftingTask runs Istio's "Traffic Shifting" task on Bookinfo: all traffic to
// reviews v1 (no stars), then 50 % to v3 (the page shows red stars about half the time),
// then all of it to v3 (red stars every time).
func TestTrafficShiftingTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, "testdata/kube-bookinfo.yaml")
	apply := func(name, body string) {
		t.Helper()
		if out, err := meshlab(t, "apply", "--wait", "--name", l.name, "-f", writeTemp(t, name, body)); err != nil {
			t.Fatalf("apply %s: %v\n%s", name, err, out)
		}
	}
	// stars is what one page shows: "red" (reviews v3), "black" (v2) or "none" (v1).
	stars := func() string {
		t.Helper()
		out, err := meshlab(t, "exec", "--name", l.name, "deploy/curl", "--", "curl", "-sS", "--max-time", "15", "http://productpage:9080/productpage")
		if err != nil || !strings.Contains(out, "<title>Simple Bookstore App</title>") {
			t.Fatalf("GET /productpage: %v\n%s", err, out)
		}
		switch {
		case strings.Contains(out, `color="red"`):
			return "red"
		case strings.Contains(out, `color="black"`):
			return "black"
		}
		return "none"
	}
	// settle waits until want comes four times in a row (the push reached the proxies).
	settle := func(what, want string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for inARow := 0; inARow < 4; {
			if s := stars(); s == want {
				inARow++
			} else if inARow = 0; time.Now().After(deadline) {
				t.Fatalf("%s: 20 s after the apply a page still showed %s stars; want %s", what, s, want)
			}
		}
	}

	apply("all-v1.yaml", trafficShiftingV1)
	settle("virtual-service-all-v1", "none")

	apply("reviews-50-v3.yaml", trafficShifting50)
	seen := map[string]int{}
	deadline := time.Now().Add(30 * time.Second)
	for seen["red"] == 0 || seen["none"] == 0 || seen["red"]+seen["none"] < 30 {
		seen[stars()]++
		if time.Now().After(deadline) {
			break
		}
	}
	// 30 pages at 50/50: fewer than 5 of either happens with p < 0.0003.
	if seen["black"] != 0 || seen["red"] < 5 || seen["none"] < 5 {
		t.Errorf("virtual-service-reviews-50-v3: pages showed %v; want about half red (v3) and half none (v1), never black", seen)
	}

	apply("reviews-v3.yaml", trafficShiftingV3)
	settle("virtual-service-reviews-v3", "red")
}
