package podnet

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshlab/meshlab/netns"
)

// recorder is Namespaces that records what it was asked, in order.
type recorder struct {
	mu    sync.Mutex
	calls []string
	fail  string // the call that fails, by its first word
}

func (r *recorder) note(call string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, call)
	if r.fail != "" && strings.HasPrefix(call, r.fail) {
		return errors.New("boom")
	}
	return nil
}

func (r *recorder) SetupPod(c netns.PodConfig) error {
	if err := r.note("setup " + c.Namespace + " " + c.NodeNamespace + " " + c.Bridge + " " + c.HostIfName + " " + c.Address.String() + " via " + c.Gateway.String()); err != nil {
		return err
	}
	if c.AllowLowPorts {
		return r.note("lowports " + c.Namespace)
	}
	return nil
}

func (r *recorder) ApplyRules(name, rules string) error { return r.note("rules " + name) }

func deps(t *testing.T, r *recorder, journal *[]string) Deps {
	t.Helper()
	dir := t.TempDir()
	return Deps{
		NS:            r,
		Journal:       func(ns string) error { *journal = append(*journal, ns); return r.note("journal " + ns) },
		Namespace:     func(key string) string { return "ml-t-" + key },
		HostIfName:    func(key string) string { return "vm-" + key },
		PodDir:        func(key string) string { return filepath.Join(dir, key) },
		NodeNamespace: "ml-t-node",
		Bridge:        "mlbr0",
		PodCIDR:       netip.MustParsePrefix("10.244.0.0/16"),
	}
}

func TestGateway(t *testing.T) {
	t.Parallel()
	if got := Gateway(netip.MustParsePrefix("10.244.0.0/16")); got.String() != "10.244.0.1/16" {
		t.Errorf("Gateway = %s, want 10.244.0.1/16", got)
	}
}

// Make journals the namespace before it makes it, and installs the capture rules (kept
// in the pod's run directory) only for a pod that captures.
func TestMakeJournalsFirstAndCapturesOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	r := &recorder{}
	var journal []string
	d := deps(t, r, &journal)
	if err := os.MkdirAll(d.PodDir("default.a"), 0o755); err != nil {
		t.Fatal(err)
	}
	m := New(d)
	if err := m.Make("default.a", netip.MustParseAddr("10.244.0.5"), true); err != nil {
		t.Fatal(err)
	}
	if err := m.MakeNow("istio-system.ztunnel", netip.MustParseAddr("10.244.0.2")); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"journal ml-t-default.a",
		"setup ml-t-default.a ml-t-node mlbr0 vm-default.a 10.244.0.5/16 via 10.244.0.1",
		"lowports ml-t-default.a",
		"rules ml-t-default.a",
		"journal ml-t-istio-system.ztunnel",
		"setup ml-t-istio-system.ztunnel ml-t-node mlbr0 vm-istio-system.ztunnel 10.244.0.2/16 via 10.244.0.1",
		"lowports ml-t-istio-system.ztunnel",
	}
	if strings.Join(r.calls, "\n") != strings.Join(want, "\n") {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(r.calls, "\n"), strings.Join(want, "\n"))
	}
	b, err := os.ReadFile(filepath.Join(d.PodDir("default.a"), "iptables.rules"))
	if err != nil || !strings.Contains(string(b), "ISTIO_REDIRECT") {
		t.Errorf("capture rules kept in the run directory: %v\n%s", err, b)
	}
}

// A failing step stops the pod's network there, with the namespace named in the error;
// the journal entry stays so that down removes what was made.
func TestMakeStopsAtTheFailingStep(t *testing.T) {
	t.Parallel()
	r := &recorder{fail: "setup"}
	var journal []string
	err := New(deps(t, r, &journal)).Make("default.b", netip.MustParseAddr("10.244.0.6"), true)
	if err == nil || !strings.Contains(err.Error(), "create pod namespace ml-t-default.b") {
		t.Fatalf("Make = %v, want the namespace named", err)
	}
	if len(journal) != 1 || len(r.calls) != 2 {
		t.Errorf("journal %v, calls %v: want the journal entry and the failed setup only", journal, r.calls)
	}
}

// At most cap(Slots) pods make their networks at once, every one of them runs, and
// their errors are passed on; without slots (a pod added by apply) it just runs.
func TestSlotsBoundConcurrentNetworks(t *testing.T) {
	t.Parallel()
	m := New(Deps{Slots: make(chan struct{}, 2)})
	var (
		running, most, ran atomic.Int32
		wg                 sync.WaitGroup
	)
	errBoom := errors.New("boom")
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := m.inSlot(func() error {
				n := running.Add(1)
				for {
					mo := most.Load()
					if n <= mo || most.CompareAndSwap(mo, n) {
						break
					}
				}
				time.Sleep(2 * time.Millisecond)
				running.Add(-1)
				ran.Add(1)
				if i == 7 {
					return errBoom
				}
				return nil
			})
			if (i == 7) != errors.Is(err, errBoom) {
				t.Errorf("pod %d: inSlot = %v", i, err)
			}
		}()
	}
	wg.Wait()
	if mo := most.Load(); mo != 2 {
		t.Errorf("at most %d networks made at once, want 2 (the slots)", mo)
	}
	if n := ran.Load(); n != 20 {
		t.Errorf("%d of 20 networks made", n)
	}
	if len(m.d.Slots) != 0 {
		t.Errorf("%d slots still held", len(m.d.Slots))
	}
	if err := New(Deps{}).inSlot(func() error { return errBoom }); !errors.Is(err, errBoom) {
		t.Errorf("without slots: %v, want the func's error", err)
	}
}
