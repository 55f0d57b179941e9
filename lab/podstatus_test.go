package lab

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab/podview"
)

// TestPodsAsksAFewAgentsAtATime stands in for the agents of a 60-pod lab with slow
// answers and holds Pods (`meshlab status`, the dashboard's pod list) to at most
// podview.Parallel agents in flight, every pod answered: asking all at once made a
// 500-pod lab on 2 cores report most agents unreachable.
func TestPodsAsksAFewAgentsAtATime(t *testing.T) {
	t.Parallel()
	const pods = 60
	var docs []string
	for i := range pods / 20 {
		docs = append(docs, fmt.Sprintf("apiVersion: meshlab.dev/v1alpha1\nkind: Workload\nmetadata: {name: w%d}\nspec: {replicas: 20, labels: {app: w%d}, ports: [8080]}\n", i, i))
	}
	o := Options{Name: "ps", ScenarioFile: "ps.yaml", ScenarioData: []byte(strings.Join(docs, "---\n")), Logger: testutil.Logger(t)}
	m, err := prepare(&o)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	paths := PathsFor(t.TempDir(), "ps")
	var inFlight, most atomic.Int32
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			seen := most.Load()
			if n <= seen || most.CompareAndSwap(seen, n) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond) // an agent woken on a busy machine
		switch {
		case r.URL.Path == agentapi.PathStatus:
			_ = json.NewEncoder(w).Encode(agentapi.Status{Ready: true, DataPlane: "meshlab-proxy"})
		case strings.HasPrefix(r.URL.Path, agentapi.PathAdmin+"stats"):
			fmt.Fprintln(w, "cluster.inbound|8080||.upstream_rq_total: 3")
		default:
			http.NotFound(w, r)
		}
	})
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // last: after every server is closed
	for _, p := range m.Pods {
		if err := os.MkdirAll(paths.PodDir(p.Key()), 0o755); err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("unix", paths.AgentSocket(p.Key()))
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: handler, ReadHeaderTimeout: time.Second}
		wg.Add(1)
		go func() { defer wg.Done(); _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
	}
	l := &Lab{opts: o, paths: paths, model: m}
	got, err := l.Pods(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != pods {
		t.Fatalf("%d pods listed, want %d", len(got), pods)
	}
	for _, ps := range got {
		if !ps.Ready || ps.RequestsIn != 3 || ps.Message != "" {
			t.Errorf("pod %s: ready %v, requests in %d, message %q; want ready with 3 requests in", ps.Key, ps.Ready, ps.RequestsIn, ps.Message)
		}
	}
	if n := most.Load(); n > podview.Parallel {
		t.Errorf("%d agents asked at once, want at most %d", n, podview.Parallel)
	} else if n < 2 {
		t.Errorf("%d agent asked at once: Pods no longer asks in parallel", n)
	}
}
