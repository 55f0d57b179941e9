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
			var docs []string
			for i, left := 0, tc.replicas; left > 0; i, left = i+1, left-100 { // at most 256 replicas per Workload
				docs = append(docs, fmt.Sprintf("apiVersion: meshlab.dev/v1alpha1\nkind: Workload\nmetadata: {name: web-%d}\nspec: {replicas: %d, labels: {app: web}, ports: [8080]}\n", i, min(left, 100)))
			}
			scenario := strings.Join(docs, "---\n")
			o := Options{Name: "rt", ScenarioFile: "rt.yaml", ScenarioData: []byte(scenario), ReadyTimeout: tc.given, Logger: testutil.Logger(t)}
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
