package httpconn

import (
	"crypto/x509"
	"fmt"
	"net/http"
	"net/netip"
	"time"

	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/filters/istiostats"
	"github.com/meshlab/meshlab/dataplane/proxy/filters/peer"
)

// peerState is one request's peer_metadata state.
type peerState = peer.HTTPState

// compileTelemetryFilter compiles istio-proxy's telemetry HTTP filters into cfg: the
// peer_metadata filter (always a TypedStruct) and istio.stats (stats.PluginConfig,
// directly or in a TypedStruct). Another filter wrapped in a TypedStruct is unwrapped
// into its own type and compiled as the other Istio filters are. It reports whether
// tc was handled.
func (cfg *Config) compileTelemetryFilter(tc *anypb.Any) (bool, error) {
	name, _, ok, err := peer.TypedStruct(tc)
	if err != nil {
		return true, fmt.Errorf("typed_config: %w", err)
	}
	if !ok {
		name = string(tc.MessageName())
	}
	switch name {
	case peer.PeerMetadataConfigType:
		if cfg.Peer != nil {
			return true, fmt.Errorf("typed_config: only one %s filter per HCM is supported by meshlab proxy", name)
		}
		f, err := peer.CompileHTTP(tc)
		if err != nil {
			return true, err
		}
		cfg.Peer = f
		return true, nil
	case istiostats.ConfigType:
		if cfg.IstioStats != nil {
			return true, fmt.Errorf("typed_config: only one istio.stats filter per HCM is supported by meshlab proxy")
		}
		c, err := istiostats.Compile(tc)
		if err != nil {
			return true, err
		}
		cfg.IstioStats = c
		return true, nil
	}
	if !ok {
		return false, nil
	}
	resolved, err := peer.ResolveTypedStruct(tc)
	if err != nil {
		return true, fmt.Errorf("typed_config: %w", err)
	}
	if resolved == tc {
		return true, fmt.Errorf("typed_config: TypedStruct of %s: unsupported type", name)
	}
	handled, err := cfg.compileIstioFilter(resolved)
	if !handled && err == nil {
		return true, fmt.Errorf("typed_config: TypedStruct of %s: only istio.alpn, grpc_stats, cors, peer_metadata and istio.stats may be wrapped (meshlab proxy)", name)
	}
	return true, err
}

// clusterIstio returns the cluster's "istio" filter metadata, nil without one.
func clusterIstio(cl *cluster.Cluster) *structpb.Struct {
	return cl.Config().Proto.GetMetadata().GetFilterMetadata()["istio"]
}

// The filter state objects a waypoint's connect_terminate sets from its HBONE
// connection's certificates, which istio.stats prefers to the connection's own.
const (
	keyPeerPrincipal  = "io.istio.peer_principal"
	keyLocalPrincipal = "io.istio.local_principal"
)

// recordIstioStats reports a finished request to istio.stats, with the peer from the
// peer_metadata filter and the TLS identities of the connection on the reporter's side.
// A server side (inbound, or a waypoint's) takes the downstream peer and the principals
// from the filter state when the stream's filters did not find them, as istio-proxy
// does: in a waypoint they were found on connect_terminate and shared with main_internal.
func (rt *router) recordIstioStats(x *exchange, code int) {
	side := &istiostats.Side{Inbound: rt.ds.Inbound, Host: x.r.Host, Cluster: x.info.UpstreamCluster}
	if x.route != nil {
		side.RouteName = x.route.Name
	}
	cl, haveCluster := rt.deps.Clusters.Get(x.info.UpstreamCluster)
	if haveCluster {
		side.ClusterIstio = clusterIstio(cl)
	}
	if gw := rt.cfg.IstioStats.Gateway; rt.ds.Inbound || gw {
		side.Peer, side.PeerKey, side.PeerSAN, side.LocalSAN = x.peer.Downstream, x.peer.DownstreamRaw, rt.ds.PeerSAN, rt.ds.LocalSAN
		if fs := x.filterState(rt.ds.FilterState); len(fs) > 0 {
			if p, l := fs[keyPeerPrincipal].Value, fs[keyLocalPrincipal].Value; p != "" || l != "" {
				side.PeerSAN, side.LocalSAN = p, l
			}
			if side.Peer == nil {
				if w := peer.FromState(fs, peer.KeyDownstreamPeer); w != nil {
					side.Peer, side.PeerKey = w, fs[peer.KeyDownstreamPeer].Value
				}
			}
		}
		if gw {
			side.Upstream = x.peer.Upstream
		}
	} else {
		side.Peer, side.PeerKey, side.Endpoint = x.peer.Upstream, x.peer.UpstreamRaw, x.upHost.Workload
		if c := x.upstream.Conn; c != nil {
			if cs, ok := peer.TLSState(c); ok && len(cs.PeerCertificates) > 0 && len(cs.PeerCertificates[0].URIs) > 0 {
				sans := rt.upstreamSANs(cs.PeerCertificates[0], cl, x.upHost)
				side.PeerSAN, side.LocalSAN = sans.peer, sans.local
			}
		}
	}
	r := &istiostats.Request{GRPC: isGRPC(x.r), Code: code, Flags: x.info.Flags.String(), Duration: time.Since(x.start),
		ResponseBytes: x.w.n}
	if x.rx != nil {
		r.RequestBytes = x.rx.n
	}
	if r.GRPC {
		r.GRPCStatus = grpcStatus(x.w.Header())
	}
	if rt.cfg.IstioStats.HasDimensions() {
		r.Attrs = rt.statsAttributes(x)
	}
	rt.cfg.IstioStats.RecordHTTP(rt.deps.Stats, side, r)
}

// statsAttributes are the request attributes istio.stats' dimensions read, as Envoy's
// CEL activation has them.
func (rt *router) statsAttributes(x *exchange) *istiostats.Attributes {
	a := &istiostats.Attributes{Request: x.r, Scheme: "http", Response: x.w.Header(), Local: rt.ds.Local,
		Remote: rt.ds.Remote, Upstream: x.upHost.Addr, Cluster: x.info.UpstreamCluster,
		DownstreamPeer: x.peer.Downstream, UpstreamPeer: x.peer.Upstream, MTLS: rt.ds.PeerSAN != "", ServerName: rt.ds.ServerName}
	if x.r.TLS != nil {
		a.Scheme = "https"
	}
	if x.route != nil {
		a.Route = x.route.Name
	}
	return a
}

// upstreamSANs are the URI SANs istio.stats reports for an outbound request over mTLS:
// the upstream peer's and the certificate the cluster presents to its host.
type upstreamSANs struct {
	// The key: the peer's leaf (crypto/tls shares one parsed certificate between the
	// connections to a peer), the cluster and the host (its transport socket match).
	leaf        *x509.Certificate
	cl          *cluster.Cluster
	host        cluster.Host
	peer, local string
}

// upstreamSANs returns the SANs of an outbound mTLS request to host of cl whose peer
// presented leaf. They are formatted once per peer certificate, cluster and host on
// this downstream connection (a URL's String allocates, and the local one resolves the
// host's transport socket), not per request. The local SAN is read when the entry is
// made: as Envoy reports the certificate the connection was made with, a rotation
// shows on the next downstream connection (and Istio's rotation keeps the identity).
// cl is nil when the cluster went away: no local SAN.
func (rt *router) upstreamSANs(leaf *x509.Certificate, cl *cluster.Cluster, host cluster.Host) *upstreamSANs {
	if s := rt.sans.Load(); s != nil && s.leaf == leaf && s.cl == cl && s.host == host {
		return s
	}
	s := &upstreamSANs{leaf: leaf, cl: cl, host: host, peer: leaf.URIs[0].String()}
	if cl != nil {
		s.local = cl.LocalURISAN(host)
	}
	rt.sans.Store(s)
	return s
}

// grpcStatus returns a response's grpc-status: its trailer, else its header (a
// trailers-only response).
func grpcStatus(h http.Header) string {
	if v := h.Get(http.TrailerPrefix + "Grpc-Status"); v != "" {
		return v
	}
	return h.Get("Grpc-Status")
}

// discoveryAddr is the address metadata discovery looks an upstream host up by, as
// istio-proxy's workload_discovery method: a socket address's IP; for an internal host
// (a waypoint's connect_originate endpoint) the destination its original_dst metadata
// names, except for an endpoint behind another network's gateway (istio metadata
// double_hbone).
func discoveryAddr(h cluster.Host) netip.Addr {
	if h.Internal.Listener == "" {
		return h.Addr.Addr()
	}
	md := h.Metadata.GetFilterMetadata()
	if _, ok := md["istio"].GetFields()["double_hbone"]; ok {
		return netip.Addr{}
	}
	ap, err := netip.ParseAddrPort(md["envoy.filters.listener.original_dst"].GetFields()["local"].GetStringValue())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr()
}

// downstreamPeerState runs the peer_metadata filter's downstream discovery on a request
// and, when the filter shares its peers with upstream, puts the peer found in the
// stream's filter state for the upstream (internal) connections.
func (rt *router) downstreamPeerState(x *exchange, r *http.Request) {
	f := rt.cfg.Peer
	remote := x.remote
	if !remote.IsValid() {
		remote = rt.ds.Remote
	}
	f.OnRequest(r.Header, &x.peer, remote.Addr())
	if f.SharedWithUpstream && x.peer.Downstream != nil {
		x.fs = peer.WithState(x.filterState(rt.ds.FilterState), peer.KeyDownstreamPeer, x.peer.Downstream, x.peer.DownstreamRaw, true)
		x.fsSet = true
	}
}
