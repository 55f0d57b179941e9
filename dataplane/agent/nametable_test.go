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
