package cluster

import (
	"errors"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/meshlab/meshlab/dataplane/proxy/tlsctx"
)

// HBONE from a sidecar or gateway (istiod with ambient on): an outbound cluster's first
// transport_socket_match, "hbone", is an internal_upstream (over raw_buffer) that sends
// the endpoints marked {tunnel: http} to the internal listener their address names
// (connect_originate), handing it the endpoint's original_dst and istio metadata and the
// cluster's istio metadata; the other matches keep Istio mTLS and plaintext for the
// other endpoints of the same cluster.

// compileSocketMatch reads one transport_socket_matches entry: TLS, plaintext, or an
// internal_upstream wrapping plaintext. Errors name the field relative to
// transport_socket.
func compileSocketMatch(m *clusterv3.Cluster_TransportSocketMatch) (SocketMatch, error) {
	ts := m.GetTransportSocket()
	pt, inner, err := compileInternalUpstream(ts)
	if err != nil {
		return SocketMatch{}, err
	}
	if pt != nil {
		ts = inner
	}
	tc, err := tlsctx.Compile(ts, false)
	if err != nil {
		return SocketMatch{}, err
	}
	if tc != nil && pt != nil {
		return SocketMatch{}, errors.New("typed_config.transport_socket: only raw_buffer inside internal_upstream is supported by meshlab proxy")
	}
	return SocketMatch{Name: m.GetName(), Match: m.GetMatch().AsMap(), TLS: tc, Passthrough: pt}, nil
}

// passthroughFor is the passthrough_metadata of the transport socket host h resolves to:
// its transport socket match's when it matches one, else the cluster's.
func (cfg *Config) passthroughFor(h Host) *Passthrough {
	if m := cfg.match(h); m != nil {
		return m.Passthrough
	}
	return cfg.Passthrough
}
