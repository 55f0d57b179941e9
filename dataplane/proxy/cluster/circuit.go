package cluster

import (
	"context"
	"errors"
	"sync"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/meshlab/meshlab/dataplane/proxy/fieldcheck"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

// ErrOverflow is returned when a circuit breaker refuses a request (Envoy's UO).
var ErrOverflow = errors.New("upstream overflow")

var circuitBreakersAllow = fieldcheck.Allow{
	"envoy.config.cluster.v3.CircuitBreakers":            {"thresholds"},
	"envoy.config.cluster.v3.CircuitBreakers.Thresholds": {"priority", "max_connections", "max_pending_requests", "max_requests", "max_retries", "track_remaining"},
}

// Thresholds are a cluster's circuit breaker limits for the DEFAULT priority.
type Thresholds struct {
	MaxConnections, MaxPendingRequests, MaxRequests, MaxRetries uint64
	// TrackRemaining publishes circuit_breakers.default.remaining_* gauges.
	TrackRemaining bool
}

// DefaultThresholds are Envoy's defaults.
var DefaultThresholds = Thresholds{MaxConnections: 1024, MaxPendingRequests: 1024, MaxRequests: 1024, MaxRetries: 3}

func thresholdsFrom(cb *clusterv3.CircuitBreakers) Thresholds {
	t := DefaultThresholds
	for _, th := range cb.GetThresholds() {
		if th.GetPriority() != corev3.RoutingPriority_DEFAULT {
			continue // HIGH priority routes are never used by this proxy
		}
		set := func(dst *uint64, v interface{ GetValue() uint32 }, present bool) {
			if present {
				*dst = uint64(v.GetValue())
			}
		}
		set(&t.MaxConnections, th.GetMaxConnections(), th.GetMaxConnections() != nil)
		set(&t.MaxPendingRequests, th.GetMaxPendingRequests(), th.GetMaxPendingRequests() != nil)
		set(&t.MaxRequests, th.GetMaxRequests(), th.GetMaxRequests() != nil)
		set(&t.MaxRetries, th.GetMaxRetries(), th.GetMaxRetries() != nil)
		t.TrackRemaining = th.GetTrackRemaining()
	}
	return t
}

// breaker enforces Thresholds as Envoy's HTTP/1.1 connection pool does: a request needs a
// connection of its own; when the cluster already has max_connections busy ones it waits
// as a pending request (counting upstream_cx_overflow); when max_pending_requests are
// already waiting, or max_requests are active, it fails with ErrOverflow (counting
// upstream_rq_pending_overflow).
type breaker struct {
	th                                      Thresholds
	cxOverflow, pendingOverflow, rtOverflow *stats.Stat
	cxOpen, pendingOpen, rqOpen, retryOpen  *stats.Stat
	pendingActive                           *stats.Stat
	remaining                               []*stats.Stat // cx, pending, rq, retries; nil unless track_remaining

	// multiplexed is set for an HTTP/2 cluster: requests share connections, so only
	// max_requests limits them, as Envoy's HTTP/2 pool does.
	multiplexed bool

	mu      sync.Mutex
	busy    uint64 // connections carrying a request
	active  uint64 // active requests
	retries uint64
	waiters []chan struct{}
}

func newBreaker(th Thresholds, sc stats.Scope) *breaker {
	cb := sc.Scope("circuit_breakers", "").Scope("default", "")
	b := &breaker{
		th:              th,
		cxOverflow:      sc.Counter("upstream_cx_overflow"),
		pendingOverflow: sc.Counter("upstream_rq_pending_overflow"),
		rtOverflow:      sc.Counter("upstream_rq_retry_overflow"),
		pendingActive:   sc.Gauge("upstream_rq_pending_active"),
		cxOpen:          cb.Gauge("cx_open"),
		pendingOpen:     cb.Gauge("rq_pending_open"),
		rqOpen:          cb.Gauge("rq_open"),
		retryOpen:       cb.Gauge("rq_retry_open"),
	}
	for _, g := range []*stats.Stat{b.cxOpen, b.pendingOpen, b.rqOpen, b.retryOpen} {
		g.Set(0)
	}
	if th.TrackRemaining {
		b.remaining = []*stats.Stat{cb.Gauge("remaining_cx"), cb.Gauge("remaining_pending"), cb.Gauge("remaining_rq"), cb.Gauge("remaining_retries")}
	}
	b.update()
	return b
}

func open(g *stats.Stat, cur, limit uint64) {
	if cur >= limit {
		g.Set(1)
	} else {
		g.Set(0)
	}
}

// acquire admits one request, waiting while every allowed connection is busy, and returns
// the function that releases it. It fails with ErrOverflow or ctx's error.
func (b *breaker) acquire(ctx context.Context) (func(), error) {
	if b.multiplexed {
		return b.acquireStream()
	}
	b.mu.Lock()
	if b.busy >= b.th.MaxConnections {
		b.cxOverflow.Inc()
		if uint64(len(b.waiters)) >= b.th.MaxPendingRequests {
			b.mu.Unlock()
			b.pendingOverflow.Inc()
			return nil, ErrOverflow
		}
		ch := make(chan struct{})
		b.waiters = append(b.waiters, ch)
		b.pendingActive.Inc()
		open(b.pendingOpen, uint64(len(b.waiters)), b.th.MaxPendingRequests)
		b.update()
		b.mu.Unlock()
		select {
		case <-ch: // the releaser handed its connection slot to us (busy unchanged)
			b.pendingActive.Dec()
			b.mu.Lock()
		case <-ctx.Done():
			b.pendingActive.Dec()
			b.mu.Lock()
			if b.removeWaiter(ch) {
				b.mu.Unlock()
				return nil, ctx.Err()
			}
			// Handed a slot just as we gave up: give it back.
			b.mu.Unlock()
			b.releaseSlot()
			return nil, ctx.Err()
		}
	} else {
		b.busy++
	}
	if b.active >= b.th.MaxRequests {
		b.mu.Unlock()
		b.releaseSlot()
		b.pendingOverflow.Inc()
		return nil, ErrOverflow
	}
	b.active++
	b.update()
	b.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			b.active--
			b.mu.Unlock()
			b.releaseSlot()
		})
	}, nil
}

// acquireStream admits one request on a multiplexed (HTTP/2) cluster: it fails with
// ErrOverflow (upstream_rq_pending_overflow) when max_requests are active.
func (b *breaker) acquireStream() (func(), error) {
	release, ok := b.admit(&b.active, b.th.MaxRequests, b.pendingOverflow)
	if !ok {
		return nil, ErrOverflow
	}
	return release, nil
}

// admit counts one more in *n unless limit are in already, in which case it counts an
// overflow instead; the release it returns (idempotent) counts it out again. Both
// refresh the gauges.
func (b *breaker) admit(n *uint64, limit uint64, overflow *stats.Stat) (func(), bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if *n >= limit {
		overflow.Inc()
		return nil, false
	}
	*n++
	b.update()
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			*n--
			b.update()
			b.mu.Unlock()
		})
	}, true
}

func (b *breaker) removeWaiter(ch chan struct{}) bool {
	for i, w := range b.waiters {
		if w == ch {
			b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
			open(b.pendingOpen, uint64(len(b.waiters)), b.th.MaxPendingRequests)
			return true
		}
	}
	return false
}

// releaseSlot frees a connection slot, handing it to the oldest pending request if any.
func (b *breaker) releaseSlot() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.waiters) > 0 && b.busy <= b.th.MaxConnections {
		ch := b.waiters[0]
		b.waiters = b.waiters[1:]
		open(b.pendingOpen, uint64(len(b.waiters)), b.th.MaxPendingRequests)
		close(ch)
		b.update()
		return
	}
	b.busy--
	b.update()
}

func (b *breaker) update() {
	open(b.cxOpen, b.busy, b.th.MaxConnections)
	open(b.rqOpen, b.active, b.th.MaxRequests)
	open(b.retryOpen, b.retries, b.th.MaxRetries)
	if b.remaining != nil {
		rem := func(limit, cur uint64) int64 {
			if cur >= limit {
				return 0
			}
			return int64(limit - cur)
		}
		b.remaining[0].Set(rem(b.th.MaxConnections, b.busy))
		b.remaining[1].Set(rem(b.th.MaxPendingRequests, uint64(len(b.waiters))))
		b.remaining[2].Set(rem(b.th.MaxRequests, b.active))
		b.remaining[3].Set(rem(b.th.MaxRetries, b.retries))
	}
}

// acquireRetry admits one retry under max_retries, counting upstream_rq_retry_overflow
// when the budget is spent.
func (b *breaker) acquireRetry() (func(), bool) {
	return b.admit(&b.retries, b.th.MaxRetries, b.rtOverflow)
}

// Breakers returns the thresholds the cluster enforces for the default priority, as
// /clusters prints them.
func (c *Cluster) Breakers() Thresholds { return c.breaker.th }
