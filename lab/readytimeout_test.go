package lab

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestReadyTimeoutScalesWithPods holds `up`'s default deadline to the number of pods the
// scenario makes: a fixed 60 s failed the last ~90 healthy pods of a 500-pod lab on two
// cores; a timeout the user gives is kept as given.
func TestReadyTimeoutScalesWithPods(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		replicas int
		given    time.Duration
		want     time.Duration
	}{
		{name: "small lab keeps the default", replicas: 3, want: 60 * time.Second},
		{name: "200 pods still fit the default", replicas: 200, want: 60 * time.Second},
		{name: "201 pods get 300ms each", replicas: 201, want: 60*time.Second + 300*time.Millisecond},
		{name: "500 pods get 150s", replicas: 500, want: 150 * time.Second},
		{name: "given timeout is kept", replicas: 500, given: 10 * time.Second, want: 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := Options{Name: "rt", ScenarioFile: "rt.yaml", ScenarioData: []byte(podsScenario(tc.replicas)), ReadyTimeout: tc.given, Logger: testutil.Logger(t)}
			m, err := prepare(&o)
			if err != nil {
				t.Fatalf("prepare: %v", err)
			}
			if len(m.Pods) != tc.replicas {
				t.Fatalf("scenario made %d pods, want %d", len(m.Pods), tc.replicas)
			}
			if o.ReadyTimeout != tc.want {
				t.Errorf("ReadyTimeout = %s for %d pods, want %s", o.ReadyTimeout, tc.replicas, tc.want)
			}
		})
	}
}

// podsScenario is a scenario of pods demo-app pods, in Workloads of at most 100 replicas
// (a Workload has at most 256).
func podsScenario(pods int) string {
	var docs []string
	for i, left := 0, pods; left > 0; i, left = i+1, left-100 {
		docs = append(docs, fmt.Sprintf("apiVersion: meshlab.dev/v1alpha1\nkind: Workload\nmetadata: {name: web-%d}\nspec: {replicas: %d, labels: {app: web}, ports: [8080]}\n", i, min(left, 100)))
	}
	return strings.Join(docs, "---\n")
}

// TestMorePodsThanTheBridgeHoldsIsRefused holds prepare (up, up --dry-run) to refusing a
// lab of more pods than its node bridge has ports, before anything is made, with the file,
// the count and the limit; the largest lab that fits is accepted.
func TestMorePodsThanTheBridgeHoldsIsRefused(t *testing.T) {
	t.Parallel()
	o := Options{Name: "big", ScenarioFile: "big.yaml", ScenarioData: []byte(podsScenario(MaxPods)), Logger: testutil.Logger(t)}
	if _, err := prepare(&o); err != nil {
		t.Fatalf("%d pods: %v", MaxPods, err)
	}
	o = Options{Name: "big", ScenarioFile: "big.yaml", ScenarioData: []byte(podsScenario(MaxPods + 1)), Logger: testutil.Logger(t)}
	_, err := prepare(&o)
	want := "big.yaml: 1024 pods: a lab's pods are ports of one Linux bridge (mlbr0 in ml-big-node), which holds at most 1023"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("1024 pods: err = %v, want it to say %q", err, want)
	}
}

// TestNeighbourWarning holds `up`'s warning to the host's neighbour table: silent while
// the pods fit (400 pods talking in pairs left 800 entries under a limit of 1024), and,
// past it, naming the setting, its value and the command that raises it.
func TestNeighbourWarning(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		pods    int
		thresh3 int
		want    []string
	}{
		{name: "fits", pods: 512, thresh3: 1024},
		{name: "unreadable limit", pods: 5000, thresh3: 0},
		{name: "past the limit", pods: 513, thresh3: 1024, want: []string{
			"513 pods need about 1026 neighbour (ARP) entries",
			"net.ipv4.neigh.default.gc_thresh3 = 1024",
			"neighbor table overflow",
			"sudo sysctl -w net.ipv4.neigh.default.gc_thresh1=2052 net.ipv4.neigh.default.gc_thresh2=4104 net.ipv4.neigh.default.gc_thresh3=8208",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := neighbourWarning(tc.pods, tc.thresh3)
			if len(tc.want) == 0 && got != "" {
				t.Errorf("warning %q, want none", got)
			}
			if len(tc.want) > 0 && got == "" {
				t.Fatalf("no warning for %d pods, limit %d", tc.pods, tc.thresh3)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("warning %q\ndoes not say %q", got, w)
				}
			}
		})
	}
}
