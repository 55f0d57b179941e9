package istiostats

import (
	"sync"
	"time"

	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

// TCPSource is what the network filter reads of its connection. Its methods are called
// from the report timer and from Close, never concurrently with each other.
type TCPSource interface {
	// Side describes the connection; read reports whether the peer's metadata is
	// settled (the exchange finished, or none will run).
	Side() (s *Side, read bool)
	// Bytes returns the downstream bytes sent and received so far.
	Bytes() (sent, received int64)
	// Flags returns Envoy's short response flags of the connection ("-" for none).
	Flags() string
}

// TCPConn reports one TCP connection as istio-proxy's network filter: the connection
// counts as opened (with its tags fixed) once the peer's metadata is known or the
// connection ends, its byte counters advance by deltas every TCPReportInterval and at
// the end, and it counts as closed at the end.
type TCPConn struct {
	c     *Config
	st    *stats.Store
	src   TCPSource
	mu    sync.Mutex
	tags  []stats.Tag
	vals  []string // the dimensions' values, evaluated when the connection opened
	open  bool
	ended bool
	sent  int64
	recv  int64
	timer *time.Timer
}

// StartTCP starts reporting a new connection.
func (c *Config) StartTCP(st *stats.Store, src TCPSource) *TCPConn {
	t := &TCPConn{c: c, st: st, src: src}
	if c.TCPReportInterval > 0 {
		t.timer = time.AfterFunc(c.TCPReportInterval, t.tick)
	}
	return t
}

func (t *TCPConn) tick() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return
	}
	t.report(false)
	t.timer.Reset(t.c.TCPReportInterval)
}

// Close reports the end of the connection. It is safe to call more than once.
func (t *TCPConn) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return
	}
	t.ended = true
	if t.timer != nil {
		t.timer.Stop()
	}
	t.report(true)
}

func (t *TCPConn) report(end bool) {
	if !t.open {
		side, read := t.src.Side()
		if !read && !end {
			return
		}
		t.tags = append(t.c.peerTags(side),
			stats.Tag{Name: "request_protocol", Value: "tcp"},
			stats.Tag{Name: "response_flags", Value: t.src.Flags()},
			stats.Tag{Name: "connection_security_policy", Value: t.c.security(side)})
		t.open = true
		if t.c.HasDimensions() {
			// A connection has no request attributes: the peers' metadata only.
			a := &Attributes{}
			if side.Inbound || t.c.Gateway {
				a.DownstreamPeer = side.Peer
			} else {
				a.UpstreamPeer = side.Peer
			}
			t.vals = t.c.evaluate(&Request{Attrs: a})
		}
		if ctr := t.c.counter(t.st, TCPOpened, t.tags, t.vals); ctr != nil {
			ctr.Inc()
		}
	}
	sent, recv := t.src.Bytes()
	if ctr := t.c.counter(t.st, TCPSent, t.tags, t.vals); ctr != nil {
		ctr.Add(sent - t.sent)
	}
	if ctr := t.c.counter(t.st, TCPReceived, t.tags, t.vals); ctr != nil {
		ctr.Add(recv - t.recv)
	}
	t.sent, t.recv = sent, recv
	if end {
		if ctr := t.c.counter(t.st, TCPClosed, t.tags, t.vals); ctr != nil {
			ctr.Inc()
		}
	}
}
