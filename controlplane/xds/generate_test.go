package xds

import (
	"bytes"
	"net/netip"
	"slices"
	"strings"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxy "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
)

func generate(t *testing.T, m *model.Model, podName string) map[resource.Type][]types.Resource {
	t.Helper()
	pod := m.Pod(podName)
	if pod == nil {
		t.Fatalf("no pod %q in model", podName)
	}
	res, err := Generate(m, pod)
	if err != nil {
		t.Fatalf("Generate(%s): %v", podName, err)
	}
	return res
}

func names(rs []types.Resource) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, cachev3.GetResourceName(r))
	}
	return out
}

func TestGenerateGolden(t *testing.T) {
	t.Parallel()
	for _, pod := range []string{"frontend-v1", "backend-v1"} {
		t.Run(pod, func(t *testing.T) {
			t.Parallel()
			res := generate(t, helloModel(), pod)
			unpacked := 0
			for typ, rs := range res {
				for _, r := range rs {
					unpacked += validateDeep(t, typ+"/"+cachev3.GetResourceName(r), r)
				}
			}
			// virtualOutbound: 2 tcp_proxy; 0.0.0.0_8080: http_inspector, HCM + fault +
			// router, and the PassthroughFilterChain's tcp_proxy;
			// virtualInbound: original_dst, tls_inspector, http_inspector, the blackhole
			// tcp_proxy, the PERMISSIVE passthrough chains (mTLS HTTP: DownstreamTlsContext,
			// HCM + router; plaintext HTTP: HCM + router; mTLS TCP: DownstreamTlsContext +
			// tcp_proxy; plaintext and one-way TLS TCP: a tcp_proxy each), an mTLS chain
			// (DownstreamTlsContext, HCM + router) and a plaintext one (HCM + router); 2
			// auto-mTLS clusters: UpstreamTlsContext + RawBuffer each; and the FileAccessLog
			// of each of the 13 HCMs and tcp_proxies; in RDS, the previous_hosts retry
			// predicate of the default retry policy of each of the 2 services' routes; the
			// HttpProtocolOptions of the 2 passthrough clusters; grpc_stats, fault and cors
			// in each of the 4 inbound HCMs, and grpc_stats, istio.alpn and cors added to
			// the outbound one; Istio's telemetry (telemetry.go): peer_metadata and
			// istio.stats in each of the 5 HCMs, istio.stats before the 5 tcp_proxies
			// but virtualOutbound's loop guard, istio.metadata_exchange first on the 8
			// inbound chains, and on the 3 outbound and passthrough clusters; istiod's
			// UUID request_id_extension in each of the 5 HCMs (tracing_default.go).
			if unpacked != 91 {
				t.Errorf("unpacked %d typed configs, want 91", unpacked)
			}
			testutil.Golden(t, "hello-"+pod, dumpJSON(t, res))
		})
	}
}

func TestGenerateHelloNames(t *testing.T) {
	t.Parallel()
	res := generate(t, helloModel(), "frontend-v1")
	want := map[resource.Type][]string{
		resource.ListenerType: {"0.0.0.0_8080", "virtualInbound", "virtualOutbound"},
		resource.ClusterType: {
			"BlackHoleCluster", "InboundPassthroughCluster", "PassthroughCluster", "inbound|8080||",
			"outbound|8080||backend.default.svc.cluster.local", "outbound|8080||frontend.default.svc.cluster.local",
		},
		resource.RouteType:    {"8080"},
		resource.EndpointType: {"outbound|8080||backend.default.svc.cluster.local", "outbound|8080||frontend.default.svc.cluster.local"},
		resource.SecretType:   nil, // a sidecar's secrets come from its agent
	}
	for typ, w := range want {
		if got := names(res[typ]); !slices.Equal(got, w) {
			t.Errorf("%s names = %q, want %q", typ, got, w)
		}
	}
	if len(res) != len(want) {
		t.Errorf("got %d resource types, want %d", len(res), len(want))
	}

	rc := res[resource.RouteType][0].(*route.RouteConfiguration)
	var vhosts []string
	for _, vh := range rc.GetVirtualHosts() {
		vhosts = append(vhosts, vh.GetName())
	}
	wantVH := []string{"backend.default.svc.cluster.local:8080", "frontend.default.svc.cluster.local:8080", "allow_any"}
	if !slices.Equal(vhosts, wantVH) {
		t.Errorf("virtual hosts = %q, want %q", vhosts, wantVH)
	}
	if got := rc.GetVirtualHosts()[0].GetRoutes()[0].GetRoute().GetCluster(); got != "outbound|8080||backend.default.svc.cluster.local" {
		t.Errorf("backend route cluster = %q", got)
	}
}

func TestGenerateEndpoints(t *testing.T) {
	t.Parallel()
	res := generate(t, helloModel(), "frontend-v1")
	got := map[string][]string{}
	for _, r := range res[resource.EndpointType] {
		cla := r.(*endpoint.ClusterLoadAssignment)
		var addrs []string
		for _, le := range cla.GetEndpoints() {
			for _, lb := range le.GetLbEndpoints() {
				sa := lb.GetEndpoint().GetAddress().GetSocketAddress()
				addrs = append(addrs, netip.AddrPortFrom(netip.MustParseAddr(sa.GetAddress()), uint16(sa.GetPortValue())).String())
			}
		}
		got[cla.GetClusterName()] = addrs
	}
	want := map[string][]string{
		"outbound|8080||backend.default.svc.cluster.local":  {"10.244.0.3:8080", "10.244.0.4:8080"},
		"outbound|8080||frontend.default.svc.cluster.local": {"10.244.0.2:8080"},
	}
	for k, w := range want {
		if !slices.Equal(got[k], w) {
			t.Errorf("endpoints of %s = %q, want %q", k, got[k], w)
		}
	}
}

func TestGenerateSnapshotConsistent(t *testing.T) {
	t.Parallel()
	m := withTCPService(helloModel())
	for _, pod := range m.Pods {
		res, err := Generate(m, pod)
		if err != nil {
			t.Fatalf("Generate(%s): %v", pod.Name, err)
		}
		snap, err := cachev3.NewSnapshot("v1", res)
		if err != nil {
			t.Fatalf("NewSnapshot(%s): %v", pod.Name, err)
		}
		if err := snap.Consistent(); err != nil {
			t.Errorf("snapshot of %s inconsistent: %v", pod.Name, err)
		}
	}
}

func TestGenerateDeterministic(t *testing.T) {
	t.Parallel()
	a := dumpJSON(t, generate(t, helloModel(), "backend-v2"))
	b := dumpJSON(t, generate(t, helloModel(), "backend-v2"))
	if !bytes.Equal(a, b) {
		t.Fatal("two generations of the same model differ")
	}
}

// withTCPService adds a TCP service "db" in namespace "data" (VIP 10.96.0.12, port 5432
// to target 15432) selecting a new pod db-0.
func withTCPService(m *model.Model) *model.Model {
	db := &model.Service{
		Name: "db", Namespace: "data", VIP: netip.MustParseAddr("10.96.0.12"),
		Ports:    []model.ServicePort{{Name: "tcp-pg", Port: 5432, TargetPort: 15432, Protocol: model.ProtocolTCP}},
		Selector: map[string]string{"app": "db"},
	}
	pod := &model.Pod{
		Name: "db-0", Namespace: "data", Labels: map[string]string{"app": "db"},
		IP: netip.MustParseAddr("10.244.0.5"), Ports: []uint16{15432}, Sidecar: model.SidecarSpec{Inject: true},
	}
	return model.New(append(m.Services, db), append(m.Pods, pod))
}

func findListener(t *testing.T, res map[resource.Type][]types.Resource, name string) *listener.Listener {
	t.Helper()
	for _, r := range res[resource.ListenerType] {
		if l := r.(*listener.Listener); l.GetName() == name {
			return l
		}
	}
	t.Fatalf("no listener %q in %q", name, names(res[resource.ListenerType]))
	return nil
}

// lastFilter is a chain's terminal network filter (tcp_proxy or the HCM), after the
// filters istiod puts before it (RBAC, istio.stats).
func lastFilter(fc *listener.FilterChain) *listener.Filter {
	fs := fc.GetFilters()
	if len(fs) == 0 {
		return nil
	}
	return fs[len(fs)-1]
}

func tcpProxyOf(t *testing.T, f *listener.Filter) *tcpproxy.TcpProxy {
	t.Helper()
	var tp tcpproxy.TcpProxy
	if err := f.GetTypedConfig().UnmarshalTo(&tp); err != nil {
		t.Fatalf("filter %s is not a tcp_proxy: %v", f.GetName(), err)
	}
	return &tp
}

func TestGenerateTCPService(t *testing.T) {
	t.Parallel()
	m := withTCPService(helloModel())

	// The frontend reaches db through a VIP-specific listener, not by Host header.
	res := generate(t, m, "frontend-v1")
	l := findListener(t, res, "10.96.0.12_5432")
	if l.GetBindToPort().GetValue() {
		t.Error("TCP service listener binds to its port; want a handoff target only")
	}
	if got := l.GetAddress().GetSocketAddress().GetAddress(); got != "10.96.0.12" {
		t.Errorf("TCP listener address = %q, want the VIP", got)
	}
	if got := tcpProxyOf(t, terminalFilter(l.GetFilterChains()[0])).GetCluster(); got != "outbound|5432||db.data.svc.cluster.local" {
		t.Errorf("TCP listener cluster = %q", got)
	}
	if slices.Contains(names(res[resource.RouteType]), "5432") {
		t.Error("a route configuration exists for the TCP port")
	}

	// db-0 gets, in Istio's order, the blackhole chain, the five passthrough chains of
	// PERMISSIVE (mTLS HTTP, plaintext HTTP, mTLS TCP, plaintext TCP, one-way TLS), then
	// on its target port a TCP inbound mTLS chain, a one-way TLS passthrough chain and a
	// plaintext one.
	res = generate(t, m, "db-0")
	vi := findListener(t, res, VirtualInboundListener)
	var chains []string
	for _, fc := range vi.GetFilterChains() {
		chains = append(chains, fc.GetName())
	}
	if want := []string{
		"virtualInbound-blackhole", "virtualInbound-catchall-http", "virtualInbound-catchall-http",
		"virtualInbound", "virtualInbound", "virtualInbound", "0.0.0.0_15432", "0.0.0.0_15432", "0.0.0.0_15432",
	}; !slices.Equal(chains, want) {
		t.Fatalf("virtualInbound chains = %q, want %q", chains, want)
	}
	fc := vi.GetFilterChains()[6]
	if got := fc.GetFilterChainMatch().GetDestinationPort().GetValue(); got != 15432 {
		t.Errorf("inbound chain destination_port = %d, want 15432", got)
	}
	if got := tcpProxyOf(t, terminalFilter(fc)).GetCluster(); got != "inbound|15432||" {
		t.Errorf("inbound chain cluster = %q", got)
	}
	if !slices.Contains(names(res[resource.ClusterType]), "inbound|15432||") {
		t.Error("no inbound|15432|| cluster")
	}
	// db-0 lives in another namespace: the bare names of default's services are not its.
	rc := res[resource.RouteType][0].(*route.RouteConfiguration)
	for _, vh := range rc.GetVirtualHosts() {
		if slices.Contains(vh.GetDomains(), "backend") || slices.Contains(vh.GetDomains(), "frontend") {
			t.Errorf("virtual host %s of a pod in namespace data has a bare default name: %q", vh.GetName(), vh.GetDomains())
		}
	}
}

func TestGenerateInboundHTTP(t *testing.T) {
	t.Parallel()
	res := generate(t, helloModel(), "backend-v1")
	vi := findListener(t, res, VirtualInboundListener)
	fc := vi.GetFilterChains()[6] // after the blackhole and the five PERMISSIVE passthrough chains
	if fc.GetName() != "0.0.0.0_8080" {
		t.Fatalf("seventh inbound chain = %q, want 0.0.0.0_8080", fc.GetName())
	}
	var m hcm.HttpConnectionManager
	if err := terminalFilter(fc).GetTypedConfig().UnmarshalTo(&m); err != nil {
		t.Fatalf("inbound filter is not an HCM: %v", err)
	}
	if m.GetStatPrefix() != "inbound_0.0.0.0_8080" {
		t.Errorf("stat_prefix = %q", m.GetStatPrefix())
	}
	rc := m.GetRouteConfig()
	if rc.GetName() != "inbound|8080||" || rc.GetVirtualHosts()[0].GetRoutes()[0].GetRoute().GetCluster() != "inbound|8080||" {
		t.Errorf("inline route config = %v", rc)
	}
	for _, r := range res[resource.ClusterType] {
		c := r.(*cluster.Cluster)
		if c.GetName() != "inbound|8080||" {
			continue
		}
		if c.GetType() != cluster.Cluster_ORIGINAL_DST || c.GetUpstreamBindConfig().GetSourceAddress().GetAddress() != "127.0.0.6" {
			t.Errorf("inbound cluster = %v", c)
		}
	}
}

func TestGenerateEmptyModel(t *testing.T) {
	t.Parallel()
	pod := &model.Pod{Name: "lonely", Namespace: "default", IP: netip.MustParseAddr("10.244.0.9")}
	res, err := Generate(model.New(nil, []*model.Pod{pod}), pod)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if got, want := names(res[resource.ListenerType]), []string{"virtualInbound", "virtualOutbound"}; !slices.Equal(got, want) {
		t.Errorf("listeners = %q, want %q", got, want)
	}
	if got, want := names(res[resource.ClusterType]), []string{"BlackHoleCluster", "InboundPassthroughCluster", "PassthroughCluster"}; !slices.Equal(got, want) {
		t.Errorf("clusters = %q, want %q", got, want)
	}
	if len(res[resource.RouteType])+len(res[resource.EndpointType]) != 0 {
		t.Errorf("routes/endpoints for an empty model: %q %q", names(res[resource.RouteType]), names(res[resource.EndpointType]))
	}
}

func TestGenerateErrors(t *testing.T) {
	t.Parallel()
	m := helloModel()
	dup := model.New(append(m.Services, m.Services[0]), m.Pods)
	badPort := helloModel()
	badPort.Services[0].Ports = []model.ServicePort{{Name: "tcp", Port: 0, TargetPort: 0, Protocol: model.ProtocolTCP}}
	tests := []struct {
		name    string
		model   *model.Model
		pod     *model.Pod
		wantErr string
	}{
		{name: "nil model", model: nil, pod: m.Pods[0], wantErr: "nil model"},
		{name: "nil pod", model: m, pod: nil, wantErr: "nil pod"},
		{name: "duplicate service", model: dup, pod: dup.Pods[0], wantErr: "duplicate resource"},
		{name: "port zero", model: badPort, pod: badPort.Pods[0], wantErr: "validate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Generate(tt.model, tt.pod)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Generate error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}
