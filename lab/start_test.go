package lab

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
	"github.com/meshlab/meshlab/dataplane/rqtotals"
	"github.com/meshlab/meshlab/internal/testutil"
)

// startScenario is a small lab: a pod with a sidecar and one without.
const startScenario = `apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  selector: {app: web}
  ports: [{name: http, port: 8080}]
---
apiVersion: meshlab.dev/v1alpha1
kind: Workload
metadata: {name: web, namespace: default}
spec:
  labels: {app: web}
  ports: [8080]
---
apiVersion: meshlab.dev/v1alpha1
kind: Workload
metadata: {name: plain, namespace: default}
spec:
  labels: {app: plain}
  sidecar: {inject: false}
`

// startOnRecorder runs Start's whole sequence on rec: servers on sockets in a temporary
// run root, everything that reaches the kernel or starts a process recorded. Each agent
// the lab starts is stood in for by an agent.sock that says the pod is ready, with one
// live epoch of meshlab-proxy whose request totals file it creates, as an agent does;
// what each is asked is recorded (rec.askedAgents).
//
// With run, it calls run with the lab's options instead of start.
func startOnRecorder(t *testing.T, rec *recorder, name string, run func(Options) error) (*Lab, Options, error) {
	t.Helper()
	root := t.TempDir()
	var mu sync.Mutex
	var servers []*http.Server
	rec.onStart = func(spec processSpec) {
		if spec.Role != "agent" {
			return
		}
		paths := PathsFor(root, name)
		if err := rqtotals.Create(filepath.Join(paths.PodDir(spec.Pod), rqtotals.File), os.Getuid(), os.Getgid()); err != nil {
			t.Errorf("fake agent of %s: %v", spec.Pod, err)
			return
		}
		ln, err := net.Listen("unix", paths.AgentSocket(spec.Pod))
		if err != nil {
			t.Errorf("fake agent of %s: %v", spec.Pod, err)
			return
		}
		srv := &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec.mu.Lock()
			rec.agentAsked = append(rec.agentAsked, spec.Pod+" "+r.URL.RequestURI())
			rec.mu.Unlock()
			if r.URL.Path != agentapi.PathStatus {
				http.NotFound(w, r)
				return
			}
			_ = json.NewEncoder(w).Encode(agentapi.Status{Pod: spec.Pod, Ready: true, DataPlane: agentapi.DataPlaneMeshlabProxy,
				Epochs: []agentapi.EpochStatus{{Epoch: 0, State: agentapi.EpochLive}}})
		})}
		go func() { _ = srv.Serve(ln) }()
		mu.Lock()
		servers = append(servers, srv)
		mu.Unlock()
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range servers {
			_ = s.Close()
		}
	})
	o := Options{
		Name: name, ScenarioFile: "start.yaml", ScenarioData: []byte(startScenario), RunRoot: root,
		MeshlabPath: "/bin/true", ReadyTimeout: 20 * time.Second, TerminationDrain: time.Millisecond,
		Logger: testutil.Logger(t),
	}
	if run == nil {
		l, err := start(t.Context(), o, rec.system())
		return l, o, err
	}
	return nil, o, run(o)
}

// only keeps the calls that name ns (a namespace's own sequence, whatever the other
// pods did meanwhile).
func only(calls []string, ns string) []string {
	var out []string
	for _, c := range calls {
		if strings.Contains(c, " "+ns+" ") || strings.HasSuffix(c, " "+ns) {
			out = append(out, c)
		}
	}
	return out
}

// TestStartRecordsItsSequence runs Start whole without root: the node namespace and its
// bridge, the outside world and its listeners, kube-proxy's node setup and rules, then
// each pod's namespace, link, capture rules (or cluster DNS) and processes, in order; Close
// stops the processes and removes every namespace and the run directory.
func TestStartRecordsItsSequence(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	l, o, err := startOnRecorder(t, rec, "st1", nil)
	if err != nil {
		t.Fatal(err)
	}
	calls := rec.take()
	// Before any pod: the node, the world, kube-proxy (each namespace journaled before it
	// is made: the recorder marks one that is not).
	if i := slices.IndexFunc(calls, func(c string) bool { return strings.HasPrefix(c, "setup-pod") }); i < 0 {
		t.Fatalf("no pod was set up:\n%s", strings.Join(calls, "\n"))
	} else {
		var heads []string
		for _, c := range calls[:i] {
			head, _, _ := strings.Cut(c, " ")
			if len(heads) == 0 || heads[len(heads)-1] != head {
				heads = append(heads, head)
			}
		}
		if want := []string{"setup-node", "setup-world", "listen", "prepare-node", "apply-rules"}; !slices.Equal(heads, want) {
			t.Errorf("before the pods: %q, want %q\n%s", heads, want, strings.Join(calls[:i], "\n"))
		}
	}
	for _, c := range calls {
		if strings.HasPrefix(c, "NOT IN THE JOURNAL") {
			t.Errorf("a namespace made before the journal named it: %s", c)
		}
	}
	web := only(calls, "ml-st1-web")
	wantWeb := []string{"setup-pod", "allow-low-ports", "apply-rules ml-st1-web capture.DefaultConfig", "start app of web in ml-st1-web sandboxed as uid", "start agent of web in ml-st1-web uid 0 with GOGC=off GOMEMLIMIT=64MiB MESHLAB_START_GC=paused: agent"}
	plain := only(calls, "ml-st1-plain")
	wantPlain := []string{"setup-pod", "allow-low-ports", "listen ml-st1-plain udp4 127.0.0.1:53", "listen ml-st1-plain tcp4 127.0.0.1:53", "apply-rules ml-st1-plain", "start app of plain in ml-st1-plain sandboxed as uid"}
	for _, tc := range []struct {
		pod       string
		got, want []string
	}{{"web", web, wantWeb}, {"plain", plain, wantPlain}} {
		if len(tc.got) != len(tc.want) {
			t.Errorf("pod %s: calls\n%s\nwant the sequence %q", tc.pod, strings.Join(tc.got, "\n"), tc.want)
			continue
		}
		for i := range tc.want {
			if !strings.HasPrefix(tc.got[i], tc.want[i]) {
				t.Errorf("pod %s, call %d: %q, want %q...", tc.pod, i, tc.got[i], tc.want[i])
			}
		}
	}
	if len(rec.alive) != 3 {
		t.Errorf("%d processes run, want 3 (two apps, one agent)", len(rec.alive))
	}

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	down := rec.take()
	if n := len(slices.DeleteFunc(slices.Clone(down), func(c string) bool { return !strings.HasPrefix(c, "signal ") || !strings.HasSuffix(c, " terminated") })); n != 3 {
		t.Errorf("Close sent SIGTERM %d times, want once to each of 3 processes:\n%s", n, strings.Join(down, "\n"))
	}
	checkAllUndone(t, rec, o)
}

// TestStartFailureUndoesWhatItMade: a step that fails late (the sidecar pod's agent does
// not start) fails Start with that step's error, and everything made so far (servers,
// namespaces, the other pod's processes, the run directory) is gone.
func TestStartFailureUndoesWhatItMade(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	rec.failIf = func(line string) error {
		if strings.HasPrefix(line, "start agent of web ") {
			return errors.New("fork/exec /bin/true: resource temporarily unavailable")
		}
		return nil
	}
	l, o, err := startOnRecorder(t, rec, "st2", nil)
	if l != nil {
		t.Fatal("Start returned a lab with its error")
	}
	testutil.CheckErr(t, "start", err, "start agent of web: fork/exec /bin/true: resource temporarily unavailable")
	calls := rec.take()
	if !slices.ContainsFunc(calls, func(c string) bool { return strings.HasPrefix(c, "start app of web ") }) {
		t.Fatalf("the web pod's app was not started before its agent failed:\n%s", strings.Join(calls, "\n"))
	}
	for _, ns := range []string{"ml-st2-node", "ml-st2-world", "ml-st2-web", "ml-st2-plain"} {
		if !slices.Contains(calls, "delete-netns "+ns) {
			t.Errorf("namespace %s was not deleted:\n%s", ns, strings.Join(calls, "\n"))
		}
	}
	checkAllUndone(t, rec, o)
	if _, err := net.Dial("unix", PathsFor(o.RunRoot, o.Name).APISocket()); err == nil {
		t.Error("the lab API still answers after a failed start")
	}
}

// checkAllUndone fails unless nothing the lab made is left on rec or under its run root.
func checkAllUndone(t *testing.T, rec *recorder, o Options) {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.nss) != 0 {
		t.Errorf("namespaces left: %v", rec.nss)
	}
	if len(rec.alive) != 0 {
		t.Errorf("processes left: %v", rec.alive)
	}
	if _, err := os.Stat(PathsFor(o.RunRoot, o.Name).Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("run directory left: %v", err)
	}
}

// TestUpPrintsHowToReachItThenStops: `meshlab up` (Up) prints the lab's hints with the
// binary and the lab as run, keeps the lab until its context ends, then removes it all.
func TestUpPrintsHowToReachItThenStops(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	var out testutil.SyncBuffer
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	var opts Options
	_, _, _ = startOnRecorder(t, rec, "st3", func(o Options) error {
		o.Out, opts = &out, o
		go func() { done <- up(ctx, o, rec.system()) }()
		return nil
	})
	self := "meshlab"
	if strings.Contains(os.Args[0], "/") {
		self = os.Args[0]
	}
	hint := "Stop the lab: Ctrl-C here, or from another terminal:\n  sudo " + self + " --lab st3 down\n"
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), hint) {
		select {
		case err := <-done:
			t.Fatalf("up returned before its context ended: %v\n%s", err, out.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no hint to stop the lab in:\n%s", out.String())
		}
	}
	if !strings.Contains(out.String(), "lab st3 is up: 2 pods ready") {
		t.Errorf("no summary line in:\n%s", out.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "lab st3 is down (") {
		t.Errorf("no down line in:\n%s", out.String())
	}
	checkAllUndone(t, rec, opts)
}
