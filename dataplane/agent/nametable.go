package agent

import (
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
)

// nameTablePollTimeout bounds one long-poll: the lab holds a request up to
// api.NameTableHold.
const nameTablePollTimeout = api.NameTableHold + 15*time.Second

// normalizeName is how names are compared: lowercase, no trailing dot.
func normalizeName(name string) string {
	return strings.ToLower(strings.TrimSuffix(name, "."))
}

// nameStore holds the current name table. It is safe for concurrent use; the DNS server
// reads it while the poller replaces it.
type nameStore struct {
	t atomic.Pointer[agentapi.NameTable]

	firstOnce sync.Once
	first     chan struct{} // closed by the first set; made by firstSet
	closeOnce sync.Once
}

// firstSet returns the channel the first table closes.
func (s *nameStore) firstSet() chan struct{} {
	s.firstOnce.Do(func() { s.first = make(chan struct{}) })
	return s.first
}

// waitFirst waits up to d for the first table. The agent binds its DNS port before it
// starts the proxy, and the proxy resolves its STRICT_DNS clusters at once: answered
// NXDOMAIN before the table arrives, a cluster would stay without hosts until its next
// refresh (istiod's dns_refresh_rate is 60 s). A resolver that answers late is what a
// pod's resolver is before its DNS server knows the names.
func (s *nameStore) waitFirst(d time.Duration) {
	if s.t.Load() != nil {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.firstSet():
	case <-t.C:
	}
}

// set replaces the table, normalising its names.
func (s *nameStore) set(t agentapi.NameTable) {
	names := make(map[string][]netip.Addr, len(t.Names))
	for n, addrs := range t.Names {
		k := normalizeName(n)
		names[k] = append(names[k], addrs...)
	}
	s.t.Store(&agentapi.NameTable{Version: t.Version, Names: names})
	s.closeOnce.Do(func() { close(s.firstSet()) })
}

// version returns the current table's version (0 before the first table).
func (s *nameStore) version() uint64 {
	if t := s.t.Load(); t != nil {
		return t.Version
	}
	return 0
}

// lookup returns the VIPs of name and reports whether the name is in the table.
func (s *nameStore) lookup(name string) ([]netip.Addr, bool) {
	t := s.t.Load()
	if t == nil {
		return nil, false
	}
	addrs, ok := t.Names[normalizeName(name)]
	return addrs, ok
}

// nameTablePoller long-polls the lab API for this pod's name table and keeps store
// current. Errors are retried with backoff; the store keeps the last table meanwhile.
// It asks through api.Client, the one client of the lab API (bounded answers, status
// codes as errors): the agent imports the API's contract, never the lab.
type nameTablePoller struct {
	client     *api.Client
	pod        string
	store      *nameStore
	log        *slog.Logger
	minBackoff time.Duration
	maxBackoff time.Duration
	after      func(time.Duration) <-chan time.Time // time.After; tests record the waits
}

func newNameTablePoller(labSocket, pod string, store *nameStore, log *slog.Logger) *nameTablePoller {
	return &nameTablePoller{
		client:     api.NewUnixClient(labSocket),
		pod:        pod,
		store:      store,
		log:        log,
		minBackoff: minBackoff,
		maxBackoff: maxBackoff,
		after:      time.After,
	}
}

// Run polls until ctx ends.
func (p *nameTablePoller) Run(ctx context.Context) error {
	defer p.client.Close() // nothing may outlive Run
	backoff := p.minBackoff
	for {
		have := p.store.version()
		start := time.Now()
		t, err := p.fetch(ctx, have)
		if ctx.Err() != nil {
			return nil
		}
		wait := time.Duration(0)
		switch {
		case err != nil:
			p.log.Warn("fetch name table", "err", err, "retry", backoff)
			wait = backoff
			backoff = min(2*backoff, p.maxBackoff)
		case t.Version == have && have != 0:
			// The lab held the request until its hold ended and answered the same
			// table: poll again at once (a wait would be one more wake-up of an idle
			// agent), but never spin on a lab that answers without holding.
			backoff = p.minBackoff
			if time.Since(start) < p.minBackoff {
				wait = p.minBackoff
			}
		default:
			backoff = p.minBackoff
			p.store.set(t)
			p.log.Debug("name table updated", "version", t.Version, "names", len(t.Names))
		}
		if wait > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-p.after(wait):
			}
		}
	}
}

// fetch is one long-poll: GET /v1/agents/<pod>/nametable?version=<v>.
func (p *nameTablePoller) fetch(ctx context.Context, version uint64) (agentapi.NameTable, error) {
	ctx, cancel := context.WithTimeout(ctx, nameTablePollTimeout)
	defer cancel()
	return p.client.NameTable(ctx, p.pod, version)
}
