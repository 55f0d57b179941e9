package cluster

import (
	"encoding/json"
	"fmt"
	"reflect"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/meshlab/meshlab/dataplane/proxy/tlsctx"
)

// SocketMatchFilter is the endpoint metadata filter transport_socket_matches look at.
const SocketMatchFilter = "envoy.transport_socket_match"

// SocketMatch is one transport_socket_matches entry: endpoints whose
// filter_metadata["envoy.transport_socket_match"] has every key/value of Match use TLS
// (nil: plaintext), or, with Passthrough, an internal_upstream to the internal listener
// the endpoint names (hbone_sidecar.go).
type SocketMatch struct {
	Name        string
	Match       map[string]any
	TLS         *tlsctx.Context
	Passthrough *Passthrough
}

func compileSocketMatches(ms []*clusterv3.Cluster_TransportSocketMatch) ([]SocketMatch, error) {
	var out []SocketMatch
	for i, m := range ms {
		sm, err := compileSocketMatch(m)
		if err != nil {
			return nil, fmt.Errorf("transport_socket_matches[%d].transport_socket.%w", i, err)
		}
		out = append(out, sm)
	}
	return out, nil
}

// socketMatchKey returns an endpoint's envoy.transport_socket_match metadata as
// canonical JSON ("" without any), so that Host stays comparable.
func socketMatchKey(md *corev3.Metadata) string {
	s := md.GetFilterMetadata()[SocketMatchFilter]
	if s == nil {
		return ""
	}
	b, err := json.Marshal(s.AsMap())
	if err != nil {
		return ""
	}
	return string(b)
}

// Transport returns the transport socket for host h as Envoy's
// TransportSocketMatcherImpl::resolve: the first match whose every key/value equals h's
// endpoint metadata, else the cluster's transport_socket ("default"). A nil context
// is plaintext.
func (cfg *Config) Transport(h Host) (*tlsctx.Context, string) {
	if m := cfg.match(h); m != nil {
		return m.TLS, m.Name
	}
	return cfg.TLS, "default"
}

// match is the first of the cluster's transport_socket_matches host h matches, nil for
// none (the cluster's transport_socket).
func (cfg *Config) match(h Host) *SocketMatch {
	if len(cfg.SocketMatches) == 0 {
		return nil
	}
	var md map[string]any
	if h.SocketMatch != "" {
		_ = json.Unmarshal([]byte(h.SocketMatch), &md)
	}
	for i := range cfg.SocketMatches {
		if labelsMatch(cfg.SocketMatches[i].Match, md) {
			return &cfg.SocketMatches[i]
		}
	}
	return nil
}

// labelsMatch reports whether every key of want is in md with an equal value, as
// Envoy's Config::Metadata::metadataLabelMatch (an empty match matches every endpoint,
// even one without metadata).
func labelsMatch(want, md map[string]any) bool {
	for k, v := range want {
		got, ok := md[k]
		if !ok || !reflect.DeepEqual(got, v) {
			return false
		}
	}
	return true
}

// countSocketMatches counts cluster.<name>.<match>.total_match_count for each host that
// is new in next, as Envoy resolves a host's transport socket when it creates the host.
func (c *Cluster) countSocketMatches(prev, next []Host) {
	if len(c.cfg.SocketMatches) == 0 {
		return
	}
	old := map[Host]bool{}
	for _, h := range prev {
		old[h] = true
	}
	for _, h := range next {
		if !old[h] {
			_, name := c.cfg.Transport(h)
			c.stats.scope.Counter(name + ".total_match_count").Inc()
		}
	}
}

// TLSContexts returns every upstream TLS context of the cluster: the transport_socket's
// and those of transport_socket_matches (their SDS secrets must be fetched).
func (cfg *Config) TLSContexts() []*tlsctx.Context {
	var out []*tlsctx.Context
	if cfg.TLS != nil {
		out = append(out, cfg.TLS)
	}
	for _, m := range cfg.SocketMatches {
		if m.TLS != nil {
			out = append(out, m.TLS)
		}
	}
	return out
}
