package cluster

import (
	"math/rand/v2"
	"sync"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/meshlab/meshlab/dataplane/proxy/fieldcheck"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

var outlierAllow = fieldcheck.Allow{
	"envoy.config.cluster.v3.OutlierDetection": {
		"consecutive_5xx", "interval", "base_ejection_time", "max_ejection_percent", "enforcing_consecutive_5xx",
		"consecutive_gateway_failure", "enforcing_consecutive_gateway_failure", "max_ejection_time",
		// Success-rate and failure-percentage ejection are switched off by their enforcing_*
		// being 0 (Istio sets exactly that); any other value is refused in outlierFrom's caller.
		"enforcing_success_rate", "enforcing_failure_percentage",
	},
}

// OutlierConfig is a cluster's outlier_detection with Envoy's defaults filled in.
type OutlierConfig struct {
	Consecutive5xx, ConsecutiveGatewayFailure                   uint32
	EnforcingConsecutive5xx, EnforcingConsecutiveGatewayFailure uint32 // percent
	Interval, BaseEjectionTime, MaxEjectionTime                 time.Duration
	MaxEjectionPercent                                          uint32
}

func outlierFrom(od *clusterv3.OutlierDetection) *OutlierConfig {
	u32 := func(v interface{ GetValue() uint32 }, present bool, def uint32) uint32 {
		if present {
			return v.GetValue()
		}
		return def
	}
	dur := func(d interface{ AsDuration() time.Duration }, present bool, def time.Duration) time.Duration {
		if present {
			return d.AsDuration()
		}
		return def
	}
	return &OutlierConfig{
		Consecutive5xx:                     u32(od.GetConsecutive_5Xx(), od.GetConsecutive_5Xx() != nil, 5),
		ConsecutiveGatewayFailure:          u32(od.GetConsecutiveGatewayFailure(), od.GetConsecutiveGatewayFailure() != nil, 5),
		EnforcingConsecutive5xx:            u32(od.GetEnforcingConsecutive_5Xx(), od.GetEnforcingConsecutive_5Xx() != nil, 100),
		EnforcingConsecutiveGatewayFailure: u32(od.GetEnforcingConsecutiveGatewayFailure(), od.GetEnforcingConsecutiveGatewayFailure() != nil, 0),
		Interval:                           dur(od.GetInterval(), od.GetInterval() != nil, 10*time.Second),
		BaseEjectionTime:                   dur(od.GetBaseEjectionTime(), od.GetBaseEjectionTime() != nil, 30*time.Second),
		MaxEjectionTime:                    dur(od.GetMaxEjectionTime(), od.GetMaxEjectionTime() != nil, 300*time.Second),
		MaxEjectionPercent:                 u32(od.GetMaxEjectionPercent(), od.GetMaxEjectionPercent() != nil, 10),
	}
}

// outlier is a cluster's outlier detector: consecutive 5xx and consecutive gateway
// failure ejection, with Envoy's stat names under cluster.<name>.outlier_detection.
type outlier struct {
	cfg   *OutlierConfig
	c     *Cluster
	mu    sync.Mutex
	timer map[*hostState]*time.Timer

	active, enforcedTotal, enforced5xx, detected5xx, enforcedGw, detectedGw, overflow, total *stats.Stat
}

func newOutlier(c *Cluster, cfg *OutlierConfig, sc stats.Scope) *outlier {
	od := sc.Scope("outlier_detection", "")
	o := &outlier{
		cfg: cfg, c: c, timer: map[*hostState]*time.Timer{},
		active:        od.Gauge("ejections_active"),
		enforcedTotal: od.Counter("ejections_enforced_total"),
		enforced5xx:   od.Counter("ejections_enforced_consecutive_5xx"),
		detected5xx:   od.Counter("ejections_detected_consecutive_5xx"),
		enforcedGw:    od.Counter("ejections_enforced_consecutive_gateway_failure"),
		detectedGw:    od.Counter("ejections_detected_consecutive_gateway_failure"),
		overflow:      od.Counter("ejections_overflow"),
		total:         od.Counter("ejections_total"),
	}
	o.active.Set(0)
	return o
}

// report records one result for host h: an HTTP status, or for local-origin failures the
// code Envoy maps them to (connect failure and reset 503, timeout 504), as Envoy does when
// split_external_local_origin_errors is false.
func (o *outlier) report(h Host, code int) {
	hs := o.c.hostState(h)
	o.mu.Lock()
	defer o.mu.Unlock()
	if code < 500 || code > 599 {
		hs.consecutive5xx, hs.consecutiveGw = 0, 0
		return
	}
	hs.consecutive5xx++
	if code == 502 || code == 503 || code == 504 {
		hs.consecutiveGw++
	} else {
		hs.consecutiveGw = 0
	}
	switch {
	case o.cfg.Consecutive5xx > 0 && hs.consecutive5xx >= o.cfg.Consecutive5xx:
		hs.consecutive5xx, hs.consecutiveGw = 0, 0
		o.detected5xx.Inc()
		if enforce(o.cfg.EnforcingConsecutive5xx) {
			o.eject(hs, o.enforced5xx)
		}
	case o.cfg.ConsecutiveGatewayFailure > 0 && hs.consecutiveGw >= o.cfg.ConsecutiveGatewayFailure:
		hs.consecutiveGw = 0
		o.detectedGw.Inc()
		if enforce(o.cfg.EnforcingConsecutiveGatewayFailure) {
			o.eject(hs, o.enforcedGw)
		}
	}
}

func enforce(percent uint32) bool { return rand.Uint32N(100) < percent }

// eject removes hs from load balancing when max_ejection_percent allows: Envoy ejects
// while 100*(ejections_active+1)/hosts <= max_ejection_percent, else counts
// ejections_overflow. The ejection lasts base_ejection_time times the host's number of
// ejections, capped by max_ejection_time; Envoy returns hosts at its interval sweep, so
// the time is rounded up to a whole number of intervals. Called with o.mu held.
func (o *outlier) eject(hs *hostState, enforced *stats.Stat) {
	if hs.ejected.Load() {
		return
	}
	hosts := len(o.c.Hosts())
	if hosts == 0 || 100*float64(o.active.Value()+1)/float64(hosts) > float64(o.cfg.MaxEjectionPercent) {
		o.overflow.Inc()
		return
	}
	hs.numEjections++
	d := o.cfg.BaseEjectionTime * time.Duration(hs.numEjections)
	if d > o.cfg.MaxEjectionTime {
		d = o.cfg.MaxEjectionTime
	}
	if iv := o.cfg.Interval; iv > 0 && d%iv != 0 {
		d += iv - d%iv
	}
	hs.ejected.Store(true)
	o.active.Inc()
	o.total.Inc()
	o.enforcedTotal.Inc()
	enforced.Inc()
	o.timer[hs] = time.AfterFunc(d, func() { o.uneject(hs) })
}

func (o *outlier) uneject(hs *hostState) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.timer, hs)
	if hs.ejected.CompareAndSwap(true, false) {
		o.active.Dec()
	}
}

// stop cancels pending unejections (the cluster is going away).
func (o *outlier) stop() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for hs, t := range o.timer {
		t.Stop()
		delete(o.timer, hs)
	}
}
