// Package fault is the proxy's envoy.filters.http.fault: it delays and aborts a
// percentage of requests as Envoy's HTTPFault does, with the filter's config overridden
// per route by typed_per_filter_config (where Istio puts VirtualService faults).
package fault

import (
	"errors"
	"fmt"
	"time"

	faultcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/fault/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshlab/meshlab/dataplane/proxy/fieldcheck"
	"github.com/meshlab/meshlab/dataplane/proxy/fraction"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

// FilterName is the filter's Envoy name.
const FilterName = "envoy.filters.http.fault"

// AbortBody is the body of Envoy's fault abort local reply.
const AbortBody = "fault filter abort"

var allow = fieldcheck.Allow{
	"envoy.extensions.filters.http.fault.v3.HTTPFault":    {"delay", "abort"},
	"envoy.extensions.filters.common.fault.v3.FaultDelay": {"fixed_delay", "percentage"},
	"envoy.extensions.filters.http.fault.v3.FaultAbort":   {"http_status", "percentage"},
	"envoy.type.v3.FractionalPercent":                     {"numerator", "denominator"},
}

// Config is a compiled HTTPFault. The zero value injects nothing.
type Config struct {
	Delay        time.Duration
	DelayPercent fraction.Fraction
	AbortStatus  int // 0: no abort
	AbortPercent fraction.Fraction
}

// Compile validates an HTTPFault typed_config and compiles it.
func Compile(a *anypb.Any) (*Config, error) {
	var f faultv3.HTTPFault
	if err := a.UnmarshalTo(&f); err != nil {
		return nil, fmt.Errorf("unpack HTTPFault: %w", err)
	}
	return CompileProto(&f)
}

// CompileProto validates an HTTPFault and compiles it, refusing fields the proxy does
// not implement (header-controlled faults, gRPC aborts, upstream_cluster, headers,
// downstream_nodes, max_active_faults, response rate limits).
func CompileProto(f *faultv3.HTTPFault) (*Config, error) {
	if err := f.ValidateAll(); err != nil {
		return nil, err
	}
	if err := allow.Check(f); err != nil {
		return nil, err
	}
	c := &Config{}
	if d := f.GetDelay(); d != nil {
		fd, ok := d.GetFaultDelaySecifier().(*faultcommonv3.FaultDelay_FixedDelay)
		if !ok {
			return nil, errors.New("delay.fault_delay_secifier: only fixed_delay is supported")
		}
		c.Delay = fd.FixedDelay.AsDuration()
		c.DelayPercent = fraction.From(d.GetPercentage())
	}
	if a := f.GetAbort(); a != nil {
		s, ok := a.GetErrorType().(*faultv3.FaultAbort_HttpStatus)
		if !ok {
			return nil, errors.New("abort.error_type: only http_status is supported")
		}
		c.AbortStatus = int(s.HttpStatus)
		c.AbortPercent = fraction.From(a.GetPercentage())
	}
	return c, nil
}

// Decision is what the filter injects into one request.
type Decision struct {
	Delay       time.Duration // 0: none (Envoy's DI flag otherwise)
	AbortStatus int           // 0: none (Envoy's FI flag otherwise)
}

// Decide draws the delay and the abort for one request independently, as Envoy does.
func (c *Config) Decide() Decision {
	var d Decision
	if c == nil {
		return d
	}
	if c.Delay > 0 && c.DelayPercent.Sample() {
		d.Delay = c.Delay
	}
	if c.AbortStatus != 0 && c.AbortPercent.Sample() {
		d.AbortStatus = c.AbortStatus
	}
	return d
}

// Stats are the filter's counters: http.<stat_prefix>.fault.*.
type Stats struct {
	DelaysInjected, AbortsInjected, ActiveFaults *stats.Stat
}

// NewStats returns the fault stats under an HCM's scope.
func NewStats(hcm stats.Scope) *Stats {
	sc := hcm.Scope("fault", "")
	return &Stats{
		DelaysInjected: sc.Counter("delays_injected"),
		AbortsInjected: sc.Counter("aborts_injected"),
		ActiveFaults:   sc.Gauge("active_faults"),
	}
}
