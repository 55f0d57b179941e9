package agent

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"

	"github.com/meshlab/meshlab/internal/testutil"
)

func TestNameTableLongPoll(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "api.sock")
	lab := newFakeLab(t, socket, agentapi.NameTable{Version: 3, Names: map[string][]netip.Addr{
		"Backend.Default.": {netip.MustParseAddr("10.96.0.10")},
	}})
	lab.fail = 2 // the first polls fail: the poller retries with backoff
	store := &nameStore{}
	p := newNameTablePoller(socket, "backend-v1.default", store, testutil.Logger(t))
	p.minBackoff = 10 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("poller: %v", err)
		}
	})

	eventually(t, "first table", func() error {
		if addrs, ok := store.lookup("backend.default"); !ok || addrs[0] != netip.MustParseAddr("10.96.0.10") {
			return fmt.Errorf("lookup = %v %t (version %d)", addrs, ok, store.version())
		}
		return nil
	})
	// The poller now holds a request with version=3; a change answers it at once.
	eventually(t, "held poll", func() error {
		lab.mu.Lock()
		defer lab.mu.Unlock()
		if last := lab.queries[len(lab.queries)-1]; last != "/v1/agents/backend-v1.default/nametable?version=3" {
			return fmt.Errorf("last query %s", last)
		}
		return nil
	})
	lab.set(agentapi.NameTable{Version: 4, Names: map[string][]netip.Addr{"ratings.default": {netip.MustParseAddr("10.96.0.11")}}})
	eventually(t, "updated table", func() error {
		if store.version() != 4 {
			return fmt.Errorf("version %d", store.version())
		}
		return nil
	})
	if _, ok := store.lookup("backend.default"); ok {
		t.Error("backend.default still resolves after the table dropped it")
	}
	if _, ok := store.lookup("RATINGS.default."); !ok {
		t.Error("ratings.default does not resolve")
	}
	lab.mu.Lock()
	defer lab.mu.Unlock()
	if !strings.HasSuffix(lab.queries[0], "?version=0") {
		t.Errorf("first query %s, want version=0", lab.queries[0])
	}
}

// A lab that held a request until its hold ended and answered the same table is polled
// again at once: waiting first would be one more wake-up of an idle agent. One that
// answers the same table without holding is not polled in a spin.
func TestNameTableRepollsAtOnceAfterAHeldAnswer(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "api.sock")
	lab := newFakeLab(t, socket, agentapi.NameTable{Version: 3, Names: map[string][]netip.Addr{
		"backend.default": {netip.MustParseAddr("10.96.0.10")},
	}})
	lab.hold = 1500 * time.Millisecond
	p := newNameTablePoller(socket, "backend-v1.default", &nameStore{}, testutil.Logger(t))
	p.minBackoff = time.Second // an answer sooner than this was not held
	waits := make(chan time.Duration, 16)
	p.after = func(d time.Duration) <-chan time.Time {
		waits <- d
		return time.After(d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("poller: %v", err)
		}
	})
	held := func() int {
		lab.mu.Lock()
		defer lab.mu.Unlock()
		n := 0
		for _, q := range lab.queries {
			if strings.HasSuffix(q, "?version=3") {
				n++
			}
		}
		return n
	}
	eventually(t, "a third held poll", func() error {
		if n := held(); n < 3 {
			return fmt.Errorf("%d polls with the current version", n)
		}
		return nil
	})
	select {
	case d := <-waits:
		t.Fatalf("the poller waited %s after a held answer", d)
	default:
	}

	lab.mu.Lock()
	lab.hold = -1 // the same table at once: a lab that does not hold
	lab.mu.Unlock()
	select {
	case d := <-waits:
		if d != p.minBackoff {
			t.Errorf("waited %s after an unheld answer of the same table, want %s", d, p.minBackoff)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the poller did not wait after an unheld answer of the same table")
	}
}

func TestNameTableKeepsLastTableOnErrors(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "api.sock") // nothing listens: every poll fails
	store := &nameStore{}
	store.set(agentapi.NameTable{Version: 9, Names: map[string][]netip.Addr{"a": {netip.MustParseAddr("10.96.0.1")}}})
	p := newNameTablePoller(socket, "backend-v1.default", store, testutil.Logger(t))
	p.minBackoff, p.maxBackoff = time.Millisecond, 4*time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := p.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := store.lookup("a"); !ok || store.version() != 9 {
		t.Error("the last table was lost")
	}
}
