package accesslog

import "strings"

// Flags is a set of Envoy response flags (%RESPONSE_FLAGS%).
type Flags uint32

// Response flags, in the order Envoy prints them.
const (
	FailedLocalHealthCheck           Flags = 1 << iota // LH
	NoHealthyUpstream                                  // UH
	UpstreamRequestTimeout                             // UT
	LocalReset                                         // LR
	UpstreamRemoteReset                                // UR
	UpstreamConnectionFailure                          // UF
	UpstreamConnectionTermination                      // UC
	UpstreamOverflow                                   // UO
	NoRouteFound                                       // NR
	DelayInjected                                      // DI
	FaultInjected                                      // FI
	RateLimited                                        // RL
	UnauthorizedExternalService                        // UAEX
	RateLimitServiceError                              // RLSE
	DownstreamConnectionTermination                    // DC
	UpstreamRetryLimitExceeded                         // URX
	StreamIdleTimeout                                  // SI
	InvalidEnvoyRequestHeaders                         // IH
	DownstreamProtocolError                            // DPE
	UpstreamMaxStreamDurationReached                   // UMSDR
	ResponseFromCacheFilter                            // RFCF
	NoFilterConfigFound                                // NFCF
	DurationTimeout                                    // DT
	UpstreamProtocolError                              // UPE
	NoClusterFound                                     // NC
	OverloadManager                                    // OM
	DNSResolutionFailed                                // DF
)

var flagNames = []string{"LH", "UH", "UT", "LR", "UR", "UF", "UC", "UO", "NR", "DI", "FI", "RL", "UAEX", "RLSE", "DC", "URX", "SI", "IH", "DPE", "UMSDR", "RFCF", "NFCF", "DT", "UPE", "NC", "OM", "DF"}

// String returns the flags as Envoy prints them: short names joined by "," or "-".
func (f Flags) String() string {
	if f == 0 {
		return "-"
	}
	var out []string
	for i, n := range flagNames {
		if f&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return strings.Join(out, ",")
}

// ParseFlag returns the flag of one of Envoy's short names ("NR").
func ParseFlag(name string) (Flags, bool) {
	for i, n := range flagNames {
		if n == name {
			return 1 << i, true
		}
	}
	return 0, false
}
