package xds

import (
	"net/netip"
	"slices"
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
)

// grpcModel is proxyless gRPC as Istio's grpc-echo sample: service echo (grpc 7070 ->
// 17070) over echo-v1 and echo-v2, and a client pod, all with the grpc-agent template.
func grpcModel() *model.Model {
	pod := func(name, app, version, ip string, port uint16) *model.Pod {
		return &model.Pod{
			Name: name, Namespace: "default", Workload: name,
			Labels:         map[string]string{"app": app, "version": version},
			ServiceAccount: app, IP: netip.MustParseAddr(ip), Ports: []uint16{port},
			Sidecar: model.SidecarSpec{Inject: true, GRPCAgent: true},
		}
	}
	return model.New(
		[]*model.Service{{
			Name: "echo", Namespace: "default", VIP: netip.MustParseAddr("10.96.0.30"),
			Ports:    []model.ServicePort{{Name: "grpc", Port: 7070, TargetPort: 17070, Protocol: model.ProtocolGRPC}},
			Selector: map[string]string{"app": "echo"},
		}},
		[]*model.Pod{
			pod("client", "client", "v1", "10.244.0.20", 8080),
			pod("echo-v1", "echo", "v1", "10.244.0.21", 17070),
			pod("echo-v2", "echo", "v2", "10.244.0.22", 17070),
		},
	)
}

// grpcRouting adds the routing features grpc-go honours: a weighted split between
// subsets, a header match, a timeout, retries and a fault, and ISTIO_MUTUAL with the
// subsets' rule; and STRICT mTLS mesh-wide.
func grpcRouting(m *model.Model) {
	m.Istio.VirtualServices = append(m.Istio.VirtualServices, vs("echo", &networking.VirtualService{
		Hosts: []string{"echo"},
		Http: []*networking.HTTPRoute{
			{
				Match: []*networking.HTTPMatchRequest{{Headers: map[string]*networking.StringMatch{"x-canary": exact("yes")}}},
				Route: []*networking.HTTPRouteDestination{dest("echo", "v2", 0)},
				Fault: &networking.HTTPFaultInjection{Abort: &networking.HTTPFaultInjection_Abort{
					ErrorType:  &networking.HTTPFaultInjection_Abort_HttpStatus{HttpStatus: 503},
					Percentage: &networking.Percent{Value: 50},
				}},
			},
			{
				Route:   []*networking.HTTPRouteDestination{dest("echo", "v1", 80), dest("echo", "v2", 20)},
				Timeout: durationpb.New(timeMS(2500)),
				Retries: &networking.HTTPRetry{Attempts: 3, RetryOn: "unavailable"},
			},
		},
	}))
	m.Istio.DestinationRules = append(m.Istio.DestinationRules, dr("echo", &networking.DestinationRule{
		Host:          "echo.default.svc.cluster.local",
		TrafficPolicy: &networking.TrafficPolicy{Tls: &networking.ClientTLSSettings{Mode: networking.ClientTLSSettings_ISTIO_MUTUAL}},
		Subsets: []*networking.Subset{
			{Name: "v1", Labels: map[string]string{"version": "v1"}},
			{Name: "v2", Labels: map[string]string{"version": "v2"}},
		},
	}))
	m.Istio.PeerAuthentications = P(pa("istio-system", "default", nil, MTLSStrict, nil))
}

func TestGenerateGRPCGolden(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, pod string
		mutate    func(*model.Model)
	}{
		{name: "grpc-client", pod: "client", mutate: func(*model.Model) {}},
		{name: "grpc-client-routing", pod: "client", mutate: grpcRouting},
		{name: "grpc-server-strict", pod: "echo-v1", mutate: grpcRouting},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := grpcModel()
			tc.mutate(m)
			res, err := Generate(m, m.Pod(tc.pod))
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			for typ, rs := range res {
				for _, r := range rs {
					validateDeep(t, typ+"/"+cachev3.GetResourceName(r), r)
				}
			}
			grpcConsistent(t, res)
			testutil.Golden(t, tc.name, dumpJSON(t, res))
		})
	}
}

// The names a gRPC client may dial a service by are listeners (the FQDN and, from the
// service's namespace, the short names istiod expands); a server's inbound listener
// exists per listen address; all route to RDS named after the default cluster.
func TestGRPCNamesAsIstiod(t *testing.T) {
	t.Parallel()
	m := grpcModel()
	res, err := Generate(m, m.Pod("echo-v1"))
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	want := []string{
		"echo.default.svc.cluster.local:7070", "echo.default.svc:7070", "echo.default:7070", "echo:7070",
		"xds.istio.io/grpc/lds/inbound/0.0.0.0:17070", "xds.istio.io/grpc/lds/inbound/10.244.0.21:17070", "xds.istio.io/grpc/lds/inbound/[::]:17070",
	}
	if got := names(res[resource.ListenerType]); !slices.Equal(got, want) {
		t.Errorf("listeners %q, want %q", got, want)
	}
	if got := names(res[resource.RouteType]); !slices.Equal(got, []string{"outbound|7070||echo.default.svc.cluster.local"}) {
		t.Errorf("routes %q", got)
	}
	// From another namespace only the FQDN names the service.
	m.Pods = append(m.Pods, &model.Pod{Name: "other", Namespace: "qa", IP: netip.MustParseAddr("10.244.0.23"), Sidecar: model.SidecarSpec{Inject: true, GRPCAgent: true}})
	res, err = Generate(m, m.Pod("other"))
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if got := names(res[resource.ListenerType]); !slices.Equal(got, []string{"echo.default.svc.cluster.local:7070"}) {
		t.Errorf("listeners of a client in qa %q, want only the FQDN", got)
	}
}

// A proxyless server's inbound listener is plaintext under PERMISSIVE (gRPC cannot serve
// both), mTLS from the certificate provider under STRICT, and under PERMISSIVE when the
// pod carries security.istio.io/tlsMode=istio, as istiod's buildInboundFilterChains.
func TestGRPCInboundMTLS(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		strict   bool
		tlsLabel bool
		wantTLS  bool
	}{
		{name: "permissive", wantTLS: false},
		{name: "strict", strict: true, wantTLS: true},
		{name: "permissive with tlsMode label", tlsLabel: true, wantTLS: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := grpcModel()
			if tc.strict {
				m.Istio.PeerAuthentications = P(pa("istio-system", "default", nil, MTLSStrict, nil))
			}
			pod := m.Pod("echo-v1")
			if tc.tlsLabel {
				pod.Labels[TLSModeLabel] = TLSModeIstio
			}
			res, err := Generate(m, pod)
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			for _, r := range res[resource.ListenerType] {
				l := r.(*listener.Listener)
				if l.GetApiListener() != nil {
					continue
				}
				fc := l.GetFilterChains()
				if len(fc) != 1 {
					t.Fatalf("%s: %d filter chains, want 1", l.GetName(), len(fc))
				}
				if got := fc[0].GetTransportSocket() != nil; got != tc.wantTLS {
					t.Errorf("%s: TLS %v, want %v", l.GetName(), got, tc.wantTLS)
				}
				wantName := map[bool]string{true: "inbound-mtls", false: "inbound-plaintext"}[tc.wantTLS]
				if fc[0].GetName() != wantName {
					t.Errorf("%s: chain %q, want %q", l.GetName(), fc[0].GetName(), wantName)
				}
			}
		})
	}
}

// Routes carry the VirtualService's split and the timeout as max_stream_duration, which
// is what grpc-go reads.
func TestGRPCRoutesAsGRPCReadsThem(t *testing.T) {
	t.Parallel()
	m := grpcModel()
	grpcRouting(m)
	res, err := Generate(m, m.Pod("client"))
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	rc := res[resource.RouteType][0].(*route.RouteConfiguration)
	vh := rc.GetVirtualHosts()
	if len(vh) != 1 || !slices.Contains(vh[0].GetDomains(), "echo.default.svc.cluster.local:7070") || !slices.Contains(vh[0].GetDomains(), "echo:7070") {
		t.Fatalf("virtual hosts %v, want one whose domains have the dialled host:port", vh)
	}
	rs := vh[0].GetRoutes()
	if len(rs) != 2 {
		t.Fatalf("%d routes, want 2", len(rs))
	}
	if h := rs[0].GetMatch().GetHeaders(); len(h) != 1 || h[0].GetName() != "x-canary" || rs[0].GetTypedPerFilterConfig()[FaultFilter] == nil {
		t.Errorf("first route: headers %v, fault %v", h, rs[0].GetTypedPerFilterConfig())
	}
	split := rs[1].GetRoute()
	var got []string
	for _, c := range split.GetWeightedClusters().GetClusters() {
		got = append(got, c.GetName()+"="+c.GetWeight().String())
	}
	if want := []string{"outbound|7070|v1|echo.default.svc.cluster.local=value:80", "outbound|7070|v2|echo.default.svc.cluster.local=value:20"}; !slices.Equal(got, want) {
		t.Errorf("weighted clusters %q, want %q", got, want)
	}
	if d := split.GetMaxStreamDuration().GetMaxStreamDuration().AsDuration(); d != timeMS(2500) {
		t.Errorf("max_stream_duration %v, want 2.5s", d)
	}
	if split.GetRetryPolicy().GetNumRetries().GetValue() != 3 {
		t.Errorf("retries %v, want 3", split.GetRetryPolicy())
	}
}

// grpcConsistent checks what go-control-plane's Snapshot.Consistent cannot (it does not
// read api_listeners): every route configuration an api_listener names exists, every
// cluster a route names exists, and every cluster has its load assignment.
func grpcConsistent(t *testing.T, res map[resource.Type][]types.Resource) {
	t.Helper()
	has := func(typ resource.Type, name string) bool { return slices.Contains(names(res[typ]), name) }
	for _, r := range res[resource.ListenerType] {
		l := r.(*listener.Listener)
		if l.GetApiListener() == nil {
			continue
		}
		var m hcm.HttpConnectionManager
		if err := l.GetApiListener().GetApiListener().UnmarshalTo(&m); err != nil {
			t.Fatalf("%s: %v", l.GetName(), err)
		}
		if rds := m.GetRds().GetRouteConfigName(); !has(resource.RouteType, rds) {
			t.Errorf("listener %s names route configuration %q, which is not generated", l.GetName(), rds)
		}
	}
	for _, r := range res[resource.RouteType] {
		for _, vh := range r.(*route.RouteConfiguration).GetVirtualHosts() {
			for _, rt := range vh.GetRoutes() {
				cs := []string{rt.GetRoute().GetCluster()}
				for _, w := range rt.GetRoute().GetWeightedClusters().GetClusters() {
					cs = append(cs, w.GetName())
				}
				for _, c := range cs {
					if c != "" && !has(resource.ClusterType, c) {
						t.Errorf("route %s names cluster %q, which is not generated", cachev3.GetResourceName(r), c)
					}
				}
			}
		}
	}
	for _, c := range names(res[resource.ClusterType]) {
		if !has(resource.EndpointType, c) {
			t.Errorf("cluster %s has no load assignment", c)
		}
	}
}

// Sidecars reach a proxyless pod in plaintext unless it carries the tlsMode label, as
// Istio marks endpoints from that label, which the grpc-agent template does not set.
func TestProxylessEndpointTLSMode(t *testing.T) {
	t.Parallel()
	m := grpcModel()
	pod := m.Pod("echo-v1")
	if md := endpointMetadata(m, pod, 17070); md.GetFilterMetadata()[TransportSocketMatchKey] != nil {
		t.Errorf("proxyless endpoint without the label: %v, want no tlsMode", md)
	}
	pod.Labels[TLSModeLabel] = TLSModeIstio
	if md := endpointMetadata(m, pod, 17070); md.GetFilterMetadata()[TransportSocketMatchKey] == nil {
		t.Errorf("proxyless endpoint with tlsMode=istio: %v, want the tlsMode mark", md)
	}
}
