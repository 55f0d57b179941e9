package xds

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	security "istio.io/api/security/v1beta1"

	"github.com/meshlab/meshlab/controlplane/model"
)

// chainShape renders one virtualInbound chain as "name port transport [alpn] filters tls".
func chainShape(fc *listener.FilterChain) string {
	m := fc.GetFilterChainMatch()
	var filters []string
	for _, f := range fc.GetFilters() {
		filters = append(filters, f.GetName()[strings.LastIndex(f.GetName(), ".")+1:])
	}
	tls := ""
	if fc.GetTransportSocket() != nil {
		tls = " mtls"
	}
	return fmt.Sprintf("%s %d %s %v %s%s", fc.GetName(), m.GetDestinationPort().GetValue(), m.GetTransportProtocol(),
		m.GetApplicationProtocols(), strings.Join(filters, ","), tls)
}

// The passthrough chains of virtualInbound follow the pod's mTLS mode as istiod's:
// STRICT has no chain a plaintext connection can match (it is closed, whatever its
// port), a port-level mode of a port no Service declares gets its own chains, and the
// pod's AuthorizationPolicies apply to passthrough traffic.
func TestPassthroughChains(t *testing.T) {
	t.Parallel()
	db := map[string]string{"app": "db"}
	cases := []struct {
		name string
		pas  []*model.IstioConfig[*security.PeerAuthentication]
		aps  bool
		want []string
	}{
		{
			name: "strict",
			pas:  P(pa("istio-system", "default", nil, MTLSStrict, nil)),
			want: []string{
				"virtualInbound-catchall-http 0 tls [istio-http/1.0 istio-http/1.1 istio-h2] metadata_exchange,http_connection_manager mtls",
				"virtualInbound 0 tls [] metadata_exchange,stats,tcp_proxy mtls",
			},
		},
		{
			name: "permissive",
			want: []string{
				"virtualInbound-catchall-http 0 tls [istio-http/1.0 istio-http/1.1 istio-h2] metadata_exchange,http_connection_manager mtls",
				"virtualInbound-catchall-http 0 raw_buffer [http/1.1 h2c] metadata_exchange,http_connection_manager",
				"virtualInbound 0 tls [istio-peer-exchange istio] metadata_exchange,stats,tcp_proxy mtls",
				"virtualInbound 0 raw_buffer [] metadata_exchange,stats,tcp_proxy",
				"virtualInbound 0 tls [] metadata_exchange,stats,tcp_proxy",
			},
		},
		{
			name: "disable",
			pas:  P(pa("default", "ns", nil, MTLSDisable, nil)),
			want: []string{
				"virtualInbound-catchall-http 0 raw_buffer [http/1.1 h2c] metadata_exchange,http_connection_manager",
				"virtualInbound 0 raw_buffer [] metadata_exchange,stats,tcp_proxy",
			},
		},
		{
			name: "port level on an undeclared port; the declared port's is its own chain",
			pas:  P(pa("default", "db", db, MTLSDisable, map[uint32]MTLSMode{7000: MTLSStrict, 5432: MTLSStrict})),
			want: []string{
				"virtualInbound-catchall-http 0 raw_buffer [http/1.1 h2c] metadata_exchange,http_connection_manager",
				"virtualInbound 0 raw_buffer [] metadata_exchange,stats,tcp_proxy",
				"virtualInbound-catchall-http 7000 tls [istio-http/1.0 istio-http/1.1 istio-h2] metadata_exchange,http_connection_manager mtls",
				"virtualInbound 7000 tls [] metadata_exchange,stats,tcp_proxy mtls",
			},
		},
		{
			name: "authorization",
			pas:  P(pa("istio-system", "default", nil, MTLSStrict, nil)),
			aps:  true,
			want: []string{
				"virtualInbound-catchall-http 0 tls [istio-http/1.0 istio-http/1.1 istio-h2] metadata_exchange,http_connection_manager mtls",
				"virtualInbound 0 tls [] metadata_exchange,rbac,stats,tcp_proxy mtls",
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := istioModel()
			m.Istio.PeerAuthentications = tc.pas
			if tc.aps {
				m.Istio.AuthorizationPolicies = append(m.Istio.AuthorizationPolicies, ap("default", "only-productpage", &security.AuthorizationPolicy{
					Rules: []*security.Rule{{From: []*security.Rule_From{{Source: &security.Source{Principals: []string{"cluster.local/ns/default/sa/productpage"}}}}}},
				}))
			}
			vi := findListener(t, generate(t, m, "db-v1"), VirtualInboundListener)
			var got []string
			for _, fc := range vi.GetFilterChains() {
				if n := fc.GetName(); n == VirtualInboundListener || n == VirtualInboundCatchAllHTTPChain {
					got = append(got, chainShape(fc))
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("passthrough chains:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
			if tc.aps {
				hcmOf := terminalFilter(vi.GetFilterChains()[1])
				var names []string
				for _, f := range hcmFilters(t, hcmOf) {
					names = append(names, f.GetName())
				}
				// Inbound: peer metadata, RBAC, then istiod's filters without istio.alpn.
				if want := []string{MetadataExchangeFilter, "envoy.filters.http.rbac", GRPCStatsFilter, FaultFilter, CORSFilter, StatsFilter, "envoy.filters.http.router"}; !slices.Equal(names, want) {
					t.Errorf("passthrough HTTP filters = %q, want %q", names, want)
				}
			}
		})
	}
}

// hcmFilters returns the HTTP filters of an http_connection_manager network filter.
func hcmFilters(t *testing.T, f *listener.Filter) []*hcm.HttpFilter {
	t.Helper()
	var m hcm.HttpConnectionManager
	if err := f.GetTypedConfig().UnmarshalTo(&m); err != nil {
		t.Fatalf("filter %s is not an HCM: %v", f.GetName(), err)
	}
	return m.GetHttpFilters()
}

// An outbound HTTP listener is istiod's: the HTTP chain matches what the HTTP inspector
// detects, and the default PassthroughFilterChain takes the rest to PassthroughCluster,
// or BlackHoleCluster under REGISTRY_ONLY.
func TestOutboundHTTPListenerPassthrough(t *testing.T) {
	t.Parallel()
	for _, policy := range []model.OutboundTrafficPolicy{model.AllowAny, model.RegistryOnly} {
		t.Run(policy.String(), func(t *testing.T) {
			t.Parallel()
			m := istioModel()
			m.Mesh.OutboundTrafficPolicy = policy
			l := findListener(t, generate(t, m, "productpage-v1"), OutboundHTTPListenerName(9080))
			if lf := l.GetListenerFilters(); len(lf) != 1 || lf[0].GetName() != "envoy.filters.listener.http_inspector" {
				t.Errorf("listener filters = %v, want the http_inspector", lf)
			}
			if got := chainShape(l.GetFilterChains()[0]); got != " 0 raw_buffer [http/1.1 h2c] http_connection_manager" {
				t.Errorf("HTTP chain = %q", got)
			}
			d := l.GetDefaultFilterChain()
			want := PassthroughCluster
			if policy == model.RegistryOnly {
				want = BlackHoleCluster
			}
			if d.GetName() != PassthroughFilterChain || tcpProxyOf(t, d.GetFilters()[0]).GetCluster() != want {
				t.Errorf("default chain %q to %q, want %s to %s", d.GetName(), tcpProxyOf(t, d.GetFilters()[0]).GetCluster(), PassthroughFilterChain, want)
			}
		})
	}
}

// istioctl proxy-config cluster shows a cluster's DESTINATION RULE from its
// istio.config metadata and "<unknown>" for a path that is not an Istio networking
// object's (istioctl/pkg/writer/envoy/configdump renderConfig): no generated cluster may
// carry such a path, and a cluster shaped by a DestinationRule names it.
func TestClusterConfigMetadataAsIstioctlReadsIt(t *testing.T) {
	t.Parallel()
	for _, c := range []string{"dr-subsets", "dr-traffic-policy", "dr-port-level", "se-static", "se-dns", "vs-weighted"} {
		res := generate(t, istioCaseModel(t, c), "productpage-v1")
		for _, r := range res[resource.ClusterType] {
			cl := r.(*cluster.Cluster)
			istio := cl.GetMetadata().GetFilterMetadata()["istio"]
			path, ok := istio.GetFields()["config"]
			if !ok {
				continue
			}
			pieces := strings.Split(path.GetStringValue(), "/")
			if !strings.HasPrefix(path.GetStringValue(), "/apis/networking.istio.io/") || len(pieces) != 8 || pieces[6] != "destination-rule" {
				t.Errorf("%s: cluster %s has istio.config %q; istioctl would show <unknown>", c, cl.GetName(), path.GetStringValue())
			}
			if len(istio.GetFields()["services"].GetListValue().GetValues()) == 0 {
				t.Errorf("%s: cluster %s has no istio.services", c, cl.GetName())
			}
		}
	}
	res := generate(t, istioCaseModel(t, "dr-subsets"), "productpage-v1")
	for _, r := range res[resource.ClusterType] {
		if cl := r.(*cluster.Cluster); cl.GetName() == "outbound|9080|v1|reviews.default.svc.cluster.local" {
			if got := cl.GetMetadata().GetFilterMetadata()["istio"].GetFields()["config"].GetStringValue(); got != "/apis/networking.istio.io/v1/namespaces/default/destination-rule/reviews" {
				t.Errorf("subset cluster's istio.config = %q, want the DestinationRule reviews in v1 form", got)
			}
		}
	}
}
