package jwtauthn

import "github.com/meshlab/meshlab/dataplane/proxy/stats"

// Stats are the filter's counters in its HCM's scope, as Envoy's JwtAuthnFilterStats:
// http.<stat_prefix>.jwt_authn.{allowed,denied,cors_preflight_bypassed}.
type Stats struct {
	Allowed, Denied, CORSPreflightBypassed *stats.Stat
}

// NewStats returns the filter's stats in the HCM scope hcm.
func NewStats(hcm stats.Scope) *Stats {
	sc := hcm.Scope("jwt_authn", "")
	return &Stats{
		Allowed:               sc.Counter("allowed"),
		Denied:                sc.Counter("denied"),
		CORSPreflightBypassed: sc.Counter("cors_preflight_bypassed"),
	}
}

// Count counts a result: a bypassed preflight is counted as bypassed and allowed, as
// Envoy completes it with OK.
func (s *Stats) Count(r Result) {
	switch {
	case !r.OK():
		s.Denied.Inc()
	case r.CORSBypassed:
		s.CORSPreflightBypassed.Inc()
		s.Allowed.Inc()
	default:
		s.Allowed.Inc()
	}
}
