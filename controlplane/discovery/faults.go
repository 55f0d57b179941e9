package discovery

import (
	"context"
	"net"
	"sync"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/emptypb"
)

// NackListenerName names the listener that the nack fault adds to a proxy's LDS: it
// configures a network filter with a typed_config no proxy implements
// (google.protobuf.Empty), so Envoy and meshlab proxy both refuse that listener, NACK
// the update ("Error adding/updating listener(s) meshlab-fault-nack: ...") and apply
// the update's other listeners.
const NackListenerName = "meshlab-fault-nack"

// faults is the discovery server's state of control-plane faults. Every method is safe
// for concurrent use.
type faults struct {
	mu      sync.Mutex
	delay   map[string]time.Duration // node id -> delay before each push
	hold    map[string]chan struct{} // node id -> closed when pushes are released
	nack    map[string]bool          // node ids sent a listener they reject
	stopped time.Time                // until then, the server serves nothing
	conns   map[net.Conn]struct{}    // accepted connections, closed by a stop
}

func newFaults() *faults {
	return &faults{
		delay: map[string]time.Duration{},
		hold:  map[string]chan struct{}{},
		nack:  map[string]bool{},
		conns: map[net.Conn]struct{}{},
	}
}

// gate runs before every response to node is sent: it waits out the node's push delay,
// then, while its pushes are held, until they are released, the stream ends (ctx) or
// the server stops (done).
func (f *faults) gate(ctx, done context.Context, node string) {
	f.mu.Lock()
	d, hold := f.delay[node], f.hold[node]
	f.mu.Unlock()
	if d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
		case <-done.Done():
		}
		t.Stop()
	}
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
		case <-done.Done():
		}
	}
}

// SetPushDelay delays every push to the proxy with node id node by d from now on; zero
// removes the delay. A push already waiting keeps the delay it started with.
func (s *Server) SetPushDelay(node string, d time.Duration) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	if d <= 0 {
		delete(s.faults.delay, node)
		return
	}
	s.faults.delay[node] = d
}

// HoldPushes holds every push to the proxy with node id node until ReleasePushes: the
// response is recorded as sent (so the proxy shows STALE, sent but not applied) but
// not written to its stream. Holding a held proxy does nothing.
func (s *Server) HoldPushes(node string) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	if _, ok := s.faults.hold[node]; !ok {
		s.faults.hold[node] = make(chan struct{})
	}
}

// ReleasePushes sends the held pushes of the proxy with node id node and stops holding.
func (s *Server) ReleasePushes(node string) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	if c, ok := s.faults.hold[node]; ok {
		close(c)
		delete(s.faults.hold, node)
	}
}

// SetNack makes the server send the proxy with node id node a config it rejects (on),
// or its real config again (off), and pushes at once, using the last model given to
// Update. The proxy's NACK shows in Status; the proxy keeps its last good config.
func (s *Server) SetNack(ctx context.Context, node string, on bool) error {
	s.faults.mu.Lock()
	if on {
		s.faults.nack[node] = true
	} else {
		delete(s.faults.nack, node)
	}
	s.faults.mu.Unlock()
	s.mu.Lock()
	m := s.model
	s.mu.Unlock()
	if m == nil {
		return nil // the next Update applies it
	}
	trigger := "fault: nack cleared"
	if on {
		trigger = "fault: nack"
	}
	return s.UpdateFor(ctx, m, trigger)
}

// nacked reports whether node is to be sent a config it rejects.
func (f *faults) nacked(node string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nack[node]
}

// withNackListener returns res with the listener every proxy rejects added to LDS. res is
// not modified.
func withNackListener(res map[resource.Type][]types.Resource) map[resource.Type][]types.Resource {
	out := make(map[resource.Type][]types.Resource, len(res))
	for k, v := range res {
		out[k] = v
	}
	cfg, _ := anypb.New(&emptypb.Empty{}) // cannot fail for a registered type
	l := &listenerv3.Listener{
		Name: NackListenerName,
		Address: &core.Address{Address: &core.Address_SocketAddress{SocketAddress: &core.SocketAddress{
			Address: "127.0.0.1", PortSpecifier: &core.SocketAddress_PortValue{PortValue: 15999},
		}}},
		FilterChains: []*listenerv3.FilterChain{{
			Filters: []*listenerv3.Filter{{
				Name:       "meshlab.fault.nack",
				ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: cfg},
			}},
		}},
	}
	out[resource.ListenerType] = append(append([]types.Resource(nil), res[resource.ListenerType]...), l)
	return out
}

// StopFor makes the server serve nothing for d: every open connection (so every ADS
// stream, and CSRs on the same socket) is closed, and connections accepted before d
// has passed are closed at once. Proxies keep their last config and reconnect after;
// the fault clears itself. A StopFor during a stop extends or shortens it to d from now.
func (s *Server) StopFor(d time.Duration) {
	s.faults.mu.Lock()
	s.faults.stopped = time.Now().Add(d)
	conns := make([]net.Conn, 0, len(s.faults.conns))
	for c := range s.faults.conns {
		conns = append(conns, c)
	}
	s.faults.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	s.log.Warn("xds stopped by a fault", "for", d)
}

// Restart ends every open connection (every ADS stream, and CSRs on the same socket) as a
// restarted istiod's do, and keeps serving: each proxy reconnects at once and is sent its
// config afresh. It returns how many connections it ended.
func (s *Server) Restart() int {
	s.faults.mu.Lock()
	conns := make([]net.Conn, 0, len(s.faults.conns))
	for c := range s.faults.conns {
		conns = append(conns, c)
	}
	s.faults.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	s.log.Info("xds restarted: every connection ended", "connections", len(conns))
	return len(conns)
}

// Stopped reports whether the server is serving nothing because of StopFor.
func (s *Server) Stopped() bool {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	return time.Now().Before(s.faults.stopped)
}

// gatedListener closes connections accepted while the server is stopped by a fault, and
// tracks the others so that a stop can close them.
type gatedListener struct {
	net.Listener
	f *faults
}

// Accept returns the next connection accepted while the server is not stopped.
func (l gatedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.f.mu.Lock()
		if time.Now().Before(l.f.stopped) {
			l.f.mu.Unlock()
			c.Close()
			continue
		}
		tc := &trackedConn{Conn: c, f: l.f}
		l.f.conns[tc] = struct{}{}
		l.f.mu.Unlock()
		return tc, nil
	}
}

// trackedConn removes itself from the faults' connection set when closed.
type trackedConn struct {
	net.Conn
	f    *faults
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.f.mu.Lock()
		delete(c.f.conns, c)
		c.f.mu.Unlock()
	})
	return c.Conn.Close()
}

// NetConn returns the accepted connection, for the peer credentials of auth.go.
func (c *trackedConn) NetConn() net.Conn { return c.Conn }
