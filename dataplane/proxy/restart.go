package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/meshlab/meshlab/dataplane/proxy/hotrestart"
)

// defaultStatsFlush is Envoy's stats_flush_interval default: how often a child merges
// its parent's stats (the bootstrap field itself is not supported yet). The last merge
// happens just before Terminate, so no count is lost.
const defaultStatsFlush = 5 * time.Second

// hotRestart is the Server's side of Envoy's hot restart: as a child it takes over its
// parent's admin port and listen sockets, merges its stats, and drains and terminates it
// once live; as a parent it does the same for its child.
type hotRestart struct {
	r      *hotrestart.Restarter
	latch  *hotrestart.Latch
	merger *hotrestart.Merger

	parentAlive   bool // set once before Run's goroutines start
	terminateOnce sync.Once
}

// UseHotRestart makes Run hot restart through r (which the caller closes after Run):
// without it the server starts cold whatever its epoch, as with --disable-hot-restart.
func (s *Server) UseHotRestart(r *hotrestart.Restarter) {
	s.opts.BaseID = r.BaseID() // chosen by the restarter with --use-dynamic-base-id
	s.hr = &hotRestart{r: r, latch: hotrestart.NewLatch(s.stats), merger: hotrestart.NewMerger(s.stats)}
}

// hotRestartVersion is /server_info's hot_restart_version.
func (s *Server) hotRestartVersion() string {
	if s.hr == nil {
		return "disabled"
	}
	return hotrestart.Version
}

// startAsChild asks the parent, if any, to shut down its admin listener; it runs before
// anything is bound. A parent that is gone or does not answer means a cold start.
func (s *Server) startAsChild() {
	if s.hr == nil || s.opts.RestartEpoch == 0 {
		return
	}
	start, err := s.hr.r.ShutdownAdmin()
	if err != nil {
		s.log.Warn(fmt.Sprintf("hot restart: no parent at epoch %d (%v): starting cold", s.opts.RestartEpoch-1, err))
		return
	}
	s.hr.parentAlive = true
	s.mu.Lock()
	s.startAll = start
	s.mu.Unlock()
	s.log.Info(fmt.Sprintf("hot restart: parent epoch %d shut down its admin listener", s.opts.RestartEpoch-1))
	s.pullParentStats()
}

// inheritSocket is the listener manager's InheritSocket: the parent's listen socket for
// addr, if it has one.
func (s *Server) inheritSocket(addr netip.AddrPort) net.Listener {
	if s.hr == nil || !s.hr.parentAlive {
		return nil
	}
	f, err := s.hr.r.PassListenSocket("tcp://" + addr.String())
	if err != nil {
		if !errors.Is(err, hotrestart.ErrNoParent) {
			s.log.Warn(fmt.Sprintf("hot restart: pass listen socket %s: %v", addr, err))
		}
		return nil
	}
	if f == nil {
		return nil
	}
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		s.log.Warn(fmt.Sprintf("hot restart: adopt listen socket %s: %v", addr, err))
		return nil
	}
	s.log.Info(fmt.Sprintf("hot restart: adopted the parent's listen socket %s", addr))
	return ln
}

// pullParentStats merges the parent's counter deltas and gauges.
func (s *Server) pullParentStats() {
	st, err := s.hr.r.Stats()
	if err != nil {
		if !errors.Is(err, hotrestart.ErrNoParent) {
			s.log.Warn(fmt.Sprintf("hot restart: parent stats: %v", err))
		}
		return
	}
	s.hr.merger.Merge(st)
}

// terminateParent takes the parent's last stats and tells it to exit; the child keeps
// only server.hot_restart_generation of the parent's gauges.
func (s *Server) terminateParent() {
	if s.hr == nil || !s.hr.parentAlive {
		return
	}
	s.hr.terminateOnce.Do(func() {
		s.pullParentStats()
		if err := s.hr.r.Terminate(); err != nil {
			s.log.Warn(fmt.Sprintf("hot restart: terminate parent: %v", err))
		} else {
			s.log.Info("hot restart: parent told to terminate")
		}
		s.hr.merger.Drop()
	})
}

// superviseParent runs Envoy's child sequence after start: merge the parent's stats on
// every flush; once LIVE send DrainListeners and, --parent-shutdown-time-s later,
// Terminate.
func (s *Server) superviseParent(ctx context.Context) {
	if s.hr == nil || !s.hr.parentAlive {
		return
	}
	tick := time.NewTicker(defaultStatsFlush)
	defer tick.Stop()
	live := s.liveCh
	var shutdown <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			s.pullParentStats()
		case <-live:
			live = nil
			s.listeners.StartWorkers()
			s.log.Info("hot restart: live: asking the parent to drain its listeners")
			if err := s.hr.r.DrainListeners(); err != nil {
				s.log.Warn(fmt.Sprintf("hot restart: drain parent listeners: %v", err))
			}
			// Envoy arms the parent shutdown timer when its workers start (DrainManager's
			// startParentShutdownSequence), not at process start: timed from the start, a
			// child slow to go LIVE left its parent less than --parent-shutdown-time-s to
			// drain, and the parent still answered requests after the child's last pull
			// of its counters.
			t := time.NewTimer(s.opts.ParentShutdownTime)
			defer t.Stop()
			shutdown = t.C
		case <-shutdown:
			s.terminateParent()
			return
		}
	}
}

// serveChild answers a child's hot restart requests until ctx ends.
func (s *Server) serveChild(ctx context.Context) {
	if s.hr == nil {
		return
	}
	_ = s.hr.r.ServeChild(ctx, restartParent{s})
}

// restartParent adapts the Server to hotrestart.Parent.
type restartParent struct{ s *Server }

var _ hotrestart.Parent = restartParent{}

// ShutdownAdmin closes the admin listener and, as Envoy does, terminates this process's
// own parent if it still runs, so at most three epochs live at once.
func (p restartParent) ShutdownAdmin() time.Time {
	s := p.s
	s.mu.Lock()
	srv, start := s.adminSrv, s.startAll
	s.adminSrv = nil
	s.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
	s.terminateParent()
	return start
}

// ListenSocket returns a duplicate of the listen socket bound to address.
func (p restartParent) ListenSocket(address string) *os.File {
	rest, ok := strings.CutPrefix(address, "tcp://")
	if !ok {
		return nil
	}
	ap, err := netip.ParseAddrPort(rest)
	if err != nil {
		return nil
	}
	return p.s.listeners.SocketFile(ap)
}

// Stats returns the counter deltas and gauges for the child.
func (p restartParent) Stats() *hotrestart.Stats {
	p.s.refreshServerStats()
	st := p.s.hr.latch.Stats()
	st.NumConnections = uint64(p.s.listeners.ConnCount())
	return st
}

// DrainListeners stops accepting at once and drains open connections.
func (p restartParent) DrainListeners() {
	s := p.s
	s.parentUntil.Store(time.Now().Add(s.opts.ParentShutdownTime).UnixNano())
	s.draining.Store(true)
	s.listeners.StopListeners(false)
	s.listeners.Drain(false)
	s.refreshServerStats()
	s.log.Info(fmt.Sprintf("hot restart: draining for %s", s.opts.DrainTime))
}

// Terminate shuts the server down, as Envoy's parent does on the child's request.
func (p restartParent) Terminate() { p.s.Quit() }

// maxParentFinish bounds how long finishParentDrain waits, below the agent's 5 s grace
// between SIGTERM and SIGKILL (dataplane/agent killGrace): a superseded epoch holding a
// long-lived stream (an upgrade, a gRPC stream) still exits on its own, and that stream
// is cut as Envoy would cut it.
const maxParentFinish = 3 * time.Second

// finishParentDrain runs as a draining hot restart parent shuts down: until its child
// would have terminated it (--parent-shutdown-time-s after DrainListeners, when the
// child went LIVE), the requests it has already read are answered before Run closes its
// connections. Envoy's parent keeps its connections, drained or not, until that
// Terminate and then exits at once; but restarts in quick succession end a parent
// earlier (a grandchild's start terminates it, in Envoy too, and the agent stops an
// epoch superseded by a third), which cut the requests in flight: a client whose request
// was read on a fresh connection saw EOF and did not retry. A parent past that time
// exits at once, as Envoy's.
func (s *Server) finishParentDrain() {
	until := s.parentUntil.Load()
	if until == 0 {
		return
	}
	deadline := time.Unix(0, until)
	if d := time.Now().Add(maxParentFinish); d.Before(deadline) {
		deadline = d
	}
	left := time.Until(deadline)
	n := s.listeners.ConnCount()
	if left <= 0 || n == 0 {
		return
	}
	s.log.Info(fmt.Sprintf("hot restart: %d connections open: requests already read are answered before exiting (for at most %s)", n, left.Round(time.Millisecond)))
	s.listeners.Finish(deadline)
}
