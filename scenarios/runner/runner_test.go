package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/scenarios"
)

// fakeBackend records what the runner asks and answers from fixed state.
type fakeBackend struct {
	mu       sync.Mutex
	calls    []string
	traffic  api.TrafficResult
	status   []api.ProxyStatus
	stats    map[string]uint64
	epochs   []api.ProxyEpoch
	loadSeen int
	ca       api.CAStatus
	// ztunnel's metrics and log; nil: the lab runs no ztunnel.
	zMetrics, zLog []byte
	applied        []string // the data of every apply
}

func (f *fakeBackend) ZtunnelMetrics(context.Context) ([]byte, error) {
	if f.zMetrics == nil {
		return nil, errors.New("no ztunnel")
	}
	return f.zMetrics, nil
}

func (f *fakeBackend) ZtunnelLog() ([]byte, error) {
	if f.zLog == nil {
		return nil, errors.New("no ztunnel")
	}
	return f.zLog, nil
}

// Faults: the fake has no machinery faults in effect.
func (f *fakeBackend) Faults() []api.Fault { return nil }

var _ Backend = (*fakeBackend)(nil)

func (f *fakeBackend) record(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
}

func (f *fakeBackend) Apply(_ context.Context, files []api.ConfigFile) ([]api.Change, error) {
	f.record("apply " + files[0].Name)
	f.mu.Lock()
	f.applied = append(f.applied, files[0].Data)
	f.mu.Unlock()
	return []api.Change{{Kind: "VirtualService", Namespace: "default", Name: "backend", Action: api.ActionConfigured}}, nil
}

func (f *fakeBackend) Delete(_ context.Context, _ []api.ConfigFile, refs []api.ObjectRef) ([]api.Change, error) {
	f.record("delete " + refs[0].Kind + "/" + refs[0].Name)
	return nil, nil
}

func (f *fakeBackend) SendTraffic(_ context.Context, r api.TrafficRequest) (api.TrafficResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.N == 5 { // a load round
		f.loadSeen++
		return api.TrafficResult{Sent: 5, Statuses: map[string]int{"200": 5}}, nil
	}
	f.calls = append(f.calls, "traffic "+r.Pod+" "+r.URL)
	return f.traffic, nil
}

func (f *fakeBackend) RestartProxy(_ context.Context, pod string, _ bool) (api.ProxyRestart, error) {
	f.record("restart " + pod)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.epochs = append(f.epochs, api.ProxyEpoch{Epoch: len(f.epochs), PID: 100 + len(f.epochs), State: "live"})
	return api.ProxyRestart{Pod: pod, Epoch: len(f.epochs) - 1, Live: true}, nil
}

func (f *fakeBackend) PodDetail(_ context.Context, pod string) (api.PodDetail, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return api.PodDetail{Proxy: &api.AgentStatus{Epochs: slicesClone(f.epochs)}}, nil
}

func slicesClone(e []api.ProxyEpoch) []api.ProxyEpoch { return append([]api.ProxyEpoch(nil), e...) }

func (f *fakeBackend) ProxyStatus() []api.ProxyStatus { return f.status }

// WaitSynced judges f.status as the lab judges its streams: every type's last sent
// version answered, and not by a NACK; it waits until ctx ends and names the first
// proxy that is not synced.
func (f *fakeBackend) WaitSynced(ctx context.Context) error {
	for {
		why := ""
		for _, ps := range f.ProxyStatus() {
			if !ps.Connected {
				why = "pod " + ps.Pod + " is not connected"
				break
			}
			for _, typ := range slices.Sorted(maps.Keys(ps.Types)) {
				if ts := ps.Types[typ]; ts.Sent != ts.Acked {
					why = "pod " + ps.Pod + " has not answered " + typ + " " + ts.Sent
					if ts.NackError != "" {
						why = "pod " + ps.Pod + " rejected " + typ + " " + ts.Sent + ": " + ts.NackError
					}
					break
				}
			}
			if why != "" {
				break
			}
		}
		if why == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("proxies not synced: %s: %w", why, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

func (f *fakeBackend) Stats(context.Context, string) (map[string]uint64, error) { return f.stats, nil }

func (f *fakeBackend) AddFault(_ context.Context, spec api.FaultSpec) (api.Fault, error) {
	f.record("fault " + spec.Kind + " " + spec.Duration.String())
	return api.Fault{ID: "f1", FaultSpec: spec}, nil
}

func (f *fakeBackend) RotateRoot(context.Context) error {
	f.record("rotate-root")
	return nil
}

func (f *fakeBackend) ClearFaults(_ context.Context, id string) ([]api.Fault, error) {
	f.record("clear-faults " + id)
	return []api.Fault{{ID: "f1"}}, nil
}

func (f *fakeBackend) CAStatus(context.Context) (api.CAStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ca, nil
}

func (f *fakeBackend) KillProxy(_ context.Context, pod string) (int, error) {
	f.record("kill " + pod)
	f.mu.Lock()
	defer f.mu.Unlock()
	pid := f.epochs[len(f.epochs)-1].PID
	f.epochs[len(f.epochs)-1].PID = pid + 1000 // the agent's new epoch
	return pid, nil
}

const runnerLab = `apiVersion: meshlab.dev/v1alpha1
kind: Lab
metadata: {name: r}
spec:
  title: runner
  scenario: hello
  steps:
    - name: split
      instructions: send requests
      actions:
        - traffic: {from: frontend-v1, url: "http://backend:8080/", count: 10}
      checks:
        - distribution: {want: {v1: 50, v2: 50}, tolerance: 10%}
        - status: {code: "200", fraction: 90%}
        - latency: {percentile: 50, below: 50ms}
    - name: config
      instructions: apply and delete
      solution:
        - apply: {objects: [{apiVersion: networking.istio.io/v1, kind: VirtualService, metadata: {name: backend}, spec: {hosts: [backend], http: [{route: [{destination: {host: backend}}]}]}}]}
        - delete: {objects: [{kind: VirtualService, name: backend}]}
      checks:
        - proxy-synced: {pod: frontend-v1, type: RDS}
        - nack: {pod: frontend-v1, message: "unknown field"}
        - stat: {pod: frontend-v1, name: "cluster.x.upstream_rq_200", op: ">", value: 3}
        - denied: {pod: backend-v1}
        - mtls: {from: frontend-v1, to: backend-v1}
    - name: restarts
      instructions: restart
      actions:
        - load: {from: frontend-v1, url: "http://backend:8080/"}
        - restart-proxy: {pod: backend-v1}
        - wait: {until: {epoch: {pod: backend-v1, atLeast: 1}}, timeout: 2s}
        - kill-proxy: {pod: backend-v1}
        - control-plane-stop: {duration: 2s}
        - rotate-certs: {}
      checks:
        - no-failures: {}
        - epoch: {pod: backend-v1, atLeast: 1}
`

func TestRunnerPassesAndFails(t *testing.T) {
	l, err := Parse("r.yaml", []byte(runnerLab), Sources{Scenario: scenarios.Lookup})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeBackend{
		traffic: api.TrafficResult{Sent: 10, Statuses: map[string]int{"200": 9, "503": 1},
			Pods: map[string]int{"backend-v1": 4, "backend-v2": 5, "": 1}, P50Ms: 12},
		status: []api.ProxyStatus{{Pod: "frontend-v1", Connected: true, Types: map[string]api.TypeStatus{
			"RDS": {Sent: "2", Acked: "2"}, "LDS": {Sent: "3", Acked: "2", NackError: "listener: unknown field foo"},
		}}},
		stats: map[string]uint64{"cluster.x.upstream_rq_200": 7, "http.inbound.rbac.denied": 2,
			"cluster.outbound|8080||backend.default.svc.cluster.local.ssl.handshake": 2, "listener.0.0.0.0_15006.ssl.handshake": 1},
		epochs: []api.ProxyEpoch{{Epoch: 0, PID: 100, State: "live"}},
	}
	var out bytes.Buffer
	r := &Runner{Backend: f, Out: &out, Logger: testutil.Logger(t), SyncTimeout: 1}
	rep := r.Run(t.Context(), l)
	// Step 2's apply waits for every proxy to be SYNCED; LDS is NACKed, so it gives up.
	if rep.Passed() || !rep.Steps[0].Passed() || rep.Steps[1].Error == "" || !rep.Steps[2].Passed() {
		t.Fatalf("report %+v\n%s", rep, out.String())
	}
	if !strings.Contains(rep.Steps[1].Error, "pod frontend-v1 rejected LDS 3: listener: unknown field foo") ||
		!strings.Contains(rep.Steps[1].Error, "gave up after") {
		t.Errorf("step 2 error %q does not say which proxy is not synced", rep.Steps[1].Error)
	}
	// Now with every type synced, step 2's checks run.
	f.status[0].Types["LDS"] = api.TypeStatus{Sent: "3", Acked: "3", NackError: "listener: unknown field foo"}
	out.Reset()
	st := r.RunStep(t.Context(), l, 1, l.Steps[1].Solution)
	for _, c := range st.Checks {
		if !c.Passed {
			t.Errorf("check %s failed: saw %s; want %s", c.Check, c.Saw, c.Want)
		}
	}
	want := []string{"traffic frontend-v1 http://backend:8080/", "apply r.yaml", "restart backend-v1", "kill backend-v1", "fault discovery-stop 2s", "rotate-root", "apply r.yaml", "delete VirtualService/backend"}
	if strings.Join(f.calls, "\n") != strings.Join(want, "\n") {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(f.calls, "\n"), strings.Join(want, "\n"))
	}
	if f.loadSeen == 0 {
		t.Error("the load sent nothing")
	}
	testutil.Golden(t, "runner-output", regexp.MustCompile(` in [0-9.]+[µmn]?s`).ReplaceAll(out.Bytes(), []byte(" in X")))
}

func TestChecksFail(t *testing.T) {
	l, err := Parse("r.yaml", []byte(runnerLab), Sources{Scenario: scenarios.Lookup})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeBackend{
		traffic: api.TrafficResult{Sent: 10, Statuses: map[string]int{"200": 5, "503": 5},
			Pods: map[string]int{"backend-v1": 10}, P50Ms: 80},
		stats: map[string]uint64{},
	}
	r := &Runner{Backend: f, Logger: testutil.Logger(t)}
	st := r.RunStep(t.Context(), l, 0, l.Steps[0].Actions)
	if st.Passed() || len(st.Checks) != 3 {
		t.Fatalf("step %+v", st)
	}
	for _, c := range st.Checks {
		if c.Passed || c.Saw == "" || c.Want == "" || c.Hint == "" {
			t.Errorf("check %+v: want a failure with what it saw, wanted and a hint", c)
		}
	}
	if got := st.Checks[0].Saw; got != "v1 100% of 10 answers" {
		t.Errorf("distribution saw %q", got)
	}
	res := r.Check(t.Context(), l, 1, nil)
	for _, c := range res {
		if c.Passed {
			t.Errorf("check %s passed with no state: saw %s", c.Check, c.Saw)
		}
	}
}

func TestJUnitRoundTrip(t *testing.T) {
	rep := Report{Lab: "x", Steps: []StepReport{
		{Name: "a", Checks: []Result{{Check: "status", Passed: true}, {Check: "stat", Saw: "1", Want: "2", Hint: "h"}}},
		{Name: "b", Error: "action 1 (apply): boom"},
	}}
	var b bytes.Buffer
	if err := WriteJUnit(&b, rep); err != nil {
		t.Fatal(err)
	}
	suites, err := ReadJUnit(&b)
	if err != nil {
		t.Fatal(err)
	}
	if len(suites) != 1 || suites[0].Tests != 3 || suites[0].Failures != 2 || suites[0].Cases[1].Failure.Message != "saw 1; want 2" {
		t.Fatalf("suites %+v", suites)
	}
}

// A failed report's error counts the steps that passed; a passed one has none. The
// JUnit file is what WriteJUnit writes, and a path that cannot be made says so.
func TestReportErrAndJUnitFile(t *testing.T) {
	t.Parallel()
	rep := Report{Lab: "x", Steps: []StepReport{
		{Name: "a", Checks: []Result{{Check: "status", Passed: true}}},
		{Name: "b", Error: "boom"},
		{Name: "c"},
	}}
	if err := rep.Err(); err == nil || !strings.HasPrefix(err.Error(), "lab x failed: 2 of 3 steps passed") {
		t.Errorf("Err = %v", err)
	}
	if err := (Report{Lab: "x", Steps: rep.Steps[:1]}).Err(); err != nil {
		t.Errorf("passed report: Err = %v", err)
	}
	if err := (Report{Lab: "x"}).Err(); err == nil {
		t.Errorf("a report without steps passed")
	}
	path := filepath.Join(t.TempDir(), "j.xml")
	if err := writeJUnitFile(path, rep); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	suites, err := ReadJUnit(f)
	if err != nil || len(suites) != 1 || suites[0].Tests != 2 || suites[0].Failures != 1 {
		t.Errorf("junit file: %+v, %v", suites, err)
	}
	if err := writeJUnitFile(filepath.Join(t.TempDir(), "no", "j.xml"), rep); err == nil || !strings.HasPrefix(err.Error(), "write junit: ") {
		t.Errorf("unwritable path: err = %v", err)
	}
}
