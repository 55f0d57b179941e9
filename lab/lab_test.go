package lab

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

func TestValidateName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"default", true}, {"a", true}, {"lab-2", true}, {"t1a2b3c", true},
		{"", false}, {"-a", false}, {"a-", false}, {"UPPER", false}, {"a_b", false},
		{"abcdefghijklmnopqrstu", false}, // 21 characters
		{"../etc", false},
	} {
		if err := ValidateName(tc.name); (err == nil) != tc.ok {
			t.Errorf("ValidateName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestJournalRoundTripSkipsTornLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	j, err := openJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []entry{{Kind: "netns", Name: "ml-x-node"}, {Kind: "process", PID: 12, Start: 34, Role: "agent", Pod: "p"}}
	for _, e := range want {
		if err := j.add(e); err != nil {
			t.Fatal(err)
		}
	}
	j.close()
	// A crash in the middle of a write leaves half a line.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"kind":"netns","na`)
	f.Close()
	got, err := readJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("readJournal = %+v, want %+v", got, want)
	}
	if got, err := readJournal(filepath.Join(t.TempDir(), "absent")); err != nil || got != nil {
		t.Errorf("missing journal = %v, %v; want empty", got, err)
	}
}

// TestJournalConcurrentAdds: adds from many goroutines at once (a 100-pod up), which share
// fsyncs, each return with its entry in the file, whole.
func TestJournalConcurrentAdds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	j, err := openJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			if err := j.add(entry{Kind: "process", PID: i + 1}); err != nil {
				t.Error(err)
				return
			}
			got, err := readJournal(path)
			if err != nil || !slices.ContainsFunc(got, func(e entry) bool { return e.PID == i+1 }) {
				t.Errorf("entry %d not in the journal once add returned (%v)", i+1, err)
			}
		})
	}
	wg.Wait()
	if got, _ := readJournal(path); len(got) != 50 {
		t.Errorf("journal has %d entries, want 50", len(got))
	}
}

func TestResolve(t *testing.T) {
	root := t.TempDir()
	if _, err := Resolve(root, ""); !errors.Is(err, ErrNoLab) {
		t.Errorf("no labs: err = %v, want ErrNoLab", err)
	}
	os.MkdirAll(filepath.Join(root, "one"), 0o755)
	if n, err := Resolve(root, ""); err != nil || n != "one" {
		t.Errorf("one lab: %q, %v", n, err)
	}
	os.MkdirAll(filepath.Join(root, "two"), 0o755)
	if _, err := Resolve(root, ""); err == nil {
		t.Error("two labs and no default: want an error asking for --name")
	}
	os.MkdirAll(filepath.Join(root, "default"), 0o755)
	if n, err := Resolve(root, ""); err != nil || n != "default" {
		t.Errorf("with a default lab: %q, %v", n, err)
	}
	if n, err := Resolve(root, "two"); err != nil || n != "two" {
		t.Errorf("named: %q, %v", n, err)
	}
	if _, err := Resolve(root, "Bad"); err == nil {
		t.Error("invalid name accepted")
	}
}

func TestBaseIDsDifferAcrossPodsAndLabs(t *testing.T) {
	seen := map[uint32]string{}
	for _, l := range []string{"default", "second", "t1a2b3c", "t9f8e7d"} {
		for i := 0; i < 100; i++ {
			id := baseID(l, i)
			if prev, ok := seen[id]; ok {
				t.Fatalf("baseID(%s, %d) = %d, already used by %s", l, i, id, prev)
			}
			seen[id] = l
			if id == 0 || uint64(id)*10 > 1<<32-1 {
				t.Fatalf("baseID(%s, %d) = %d: zero or overflows Envoy's x10 scaling", l, i, id)
			}
		}
	}
}

func TestProcessAliveTracksStartTime(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	start, err := processStart(cmd.Process.Pid)
	if err != nil || start == 0 {
		t.Fatalf("processStart = %d, %v", start, err)
	}
	if !processAlive(cmd.Process.Pid, start) {
		t.Error("running process reported dead")
	}
	if processAlive(cmd.Process.Pid, start+1) {
		t.Error("a different start time (pid reuse) reported alive")
	}
	cmd.Process.Kill()
	cmd.Wait()
	if processAlive(cmd.Process.Pid, start) {
		t.Error("killed process reported alive")
	}
}

func TestNameTablesLongPoll(t *testing.T) {
	pod := &model.Pod{Name: "frontend-v1", Namespace: "default", IP: netip.MustParseAddr("10.244.0.2")}
	svc := &model.Service{Name: "backend", Namespace: "default", VIP: netip.MustParseAddr("10.96.0.10")}
	nt := newNameTables(model.New([]*model.Service{svc}, []*model.Pod{pod}))
	ctx := context.Background()
	got, err := nt.get(ctx, "frontend-v1", 0)
	if err != nil || got.Version != 1 || got.Names["backend"][0] != svc.VIP {
		t.Fatalf("get = %+v, %v", got, err)
	}
	if _, err := nt.get(ctx, "nope", 0); err == nil {
		t.Error("unknown pod: want an error")
	}
	svc2 := &model.Service{Name: "other", Namespace: "default", VIP: netip.MustParseAddr("10.96.0.11")}
	go func() {
		time.Sleep(50 * time.Millisecond)
		nt.update(model.New([]*model.Service{svc, svc2}, []*model.Pod{pod}))
	}()
	got, err = nt.get(ctx, "frontend-v1", 1)
	if err != nil || got.Version != 2 || len(got.Names["other"]) != 1 {
		t.Fatalf("after update: %+v, %v", got, err)
	}
	tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if got, _ := nt.get(tctx, "frontend-v1", 2); got.Version != 2 {
		t.Errorf("timed-out poll answered version %d, want the current 2", got.Version)
	}
	// A change that leaves every pod's names as they were (a VirtualService, or a new
	// model of the same objects) wakes no poll; a pod that comes or goes does.
	same := model.New([]*model.Service{svc, svc2}, []*model.Pod{pod})
	same.Istio.VirtualServices = []*model.IstioConfig[*networking.VirtualService]{{Name: "backend", Namespace: "default",
		Spec: &networking.VirtualService{Hosts: []string{"backend"}}}}
	nt.update(same)
	tctx, cancel = context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if got, _ := nt.get(tctx, "frontend-v1", 2); got.Version != 2 {
		t.Errorf("after an update with the same names: version %d, want 2 still", got.Version)
	}
	other := &model.Pod{Name: "client", Namespace: "default", IP: netip.MustParseAddr("10.244.0.3")}
	nt.update(model.New([]*model.Service{svc, svc2}, []*model.Pod{pod, other}))
	if got, err := nt.get(ctx, "frontend-v1", 2); err != nil || got.Version != 3 {
		t.Errorf("after a pod came: %+v, %v; want version 3", got, err)
	}
	svc3 := &model.Service{Name: "other", Namespace: "default", VIP: netip.MustParseAddr("10.96.0.12")}
	nt.update(model.New([]*model.Service{svc, svc3}, []*model.Pod{pod, other}))
	if got, err := nt.get(ctx, "frontend-v1", 3); err != nil || got.Version != 4 || got.Names["other"][0] != svc3.VIP {
		t.Errorf("after a Service's address changed: %+v, %v; want version 4 with other at %s", got, err, svc3.VIP)
	}
}

func TestExampleRequest(t *testing.T) {
	front := &model.Pod{Name: "frontend-v1", Namespace: "default", Labels: map[string]string{"app": "frontend"}, Sidecar: model.SidecarSpec{Inject: true}}
	back := &model.Pod{Name: "backend-v1", Namespace: "default", Labels: map[string]string{"app": "backend"}, Sidecar: model.SidecarSpec{Inject: true}}
	svc := func(name string, proto model.Protocol) *model.Service {
		return &model.Service{Name: name, Namespace: "default", Selector: map[string]string{"app": name},
			Ports: []model.ServicePort{{Name: "p", Port: 8080, TargetPort: 8080, Protocol: proto}}}
	}
	l := &Lab{model: model.New([]*model.Service{svc("backend", model.ProtocolHTTP), svc("frontend", model.ProtocolHTTP)}, []*model.Pod{front, back})}
	// Pods sort by name: backend-v1 first, calling frontend.
	if pod, url, ok := l.ExampleRequest(); !ok || pod != "backend-v1" || url != "http://frontend:8080/" {
		t.Errorf("ExampleRequest = %q %q %v", pod, url, ok)
	}
	l = &Lab{model: model.New([]*model.Service{svc("backend", model.ProtocolTCP)}, []*model.Pod{front})}
	if _, _, ok := l.ExampleRequest(); ok {
		t.Error("suggested a request to a TCP-only service")
	}
	// A pod whose app calls an upstream is the scenario's own client.
	front.App.Upstreams = []string{"http://backend:8080/"}
	l = &Lab{model: model.New([]*model.Service{svc("backend", model.ProtocolHTTP)}, []*model.Pod{front, back})}
	if pod, url, ok := l.ExampleRequest(); !ok || pod != "frontend-v1" || url != "http://backend:8080/" {
		t.Errorf("ExampleRequest with an upstream = %q %q %v", pod, url, ok)
	}
}
