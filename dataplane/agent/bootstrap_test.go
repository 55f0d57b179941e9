package agent

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tracev3 "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/internal/testutil"
)

// fixedPod is the pod of the bootstrap golden file.
func fixedPod() Config {
	return Config{
		Lab: "demo", Pod: "backend-v1", Namespace: "default", PodIP: netip.MustParseAddr("10.244.0.3"),
		NodeID:         "sidecar~10.244.0.3~backend-v1.default~default.svc.cluster.local",
		ServiceCluster: "backend.default", Workload: "backend-v1",
		Labels:         map[string]string{"app": "backend", "version": "v1"},
		ServiceAccount: "backend", RunDir: "/run/meshlab/demo/pods/backend-v1",
		XDSSocket: "/run/meshlab/demo/xds.sock", LabSocket: "/run/meshlab/demo/api.sock",
	}.withDefaults()
}

func TestBootstrapGolden(t *testing.T) {
	data, err := renderBootstrap(fixedPod())
	if err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, "bootstrap", data)
	// With the mesh's defaultConfig.tracing.zipkin.address: Istio's tracer and its
	// cluster (testdata/contract/agent-bootstrap-zipkin.json in the proxy is a copy).
	c := fixedPod()
	c.ZipkinAddress = "zipkin.istio-system:9411"
	if data, err = renderBootstrap(c); err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, "bootstrap-zipkin", data)
	// A host written $(HOST_IP) is the pod's host IP, as pilot-agent's addressConverter
	// makes it: the bootstrap is the one of that address (golden
	// bootstrap-zipkin-hostip); without a host IP it stays as written, as there.
	c.ZipkinAddress, c.HostIP = "$(HOST_IP):9411", "10.244.0.1"
	if data, err = renderBootstrap(c); err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, "bootstrap-zipkin-hostip", data)
	byIP := c
	byIP.ZipkinAddress = "10.244.0.1:9411"
	if want, err := renderBootstrap(byIP); err != nil || !bytes.Equal(data, want) {
		t.Errorf("$(HOST_IP):9411 with host IP 10.244.0.1: bootstrap differs from 10.244.0.1:9411's (%v)", err)
	}
	c.HostIP = ""
	if data, err = renderBootstrap(c); err != nil || !bytes.Contains(data, []byte(`"address": "$(HOST_IP)"`)) {
		t.Errorf("$(HOST_IP) without a host IP: %v, want the host kept:\n%s", err, data)
	}
	for _, bad := range []string{"zipkin.istio-system", "zipkin:0", ":9411", "zipkin:http"} {
		c.ZipkinAddress = bad
		if _, err := renderBootstrap(c); err == nil || !strings.Contains(err.Error(), "zipkin address") {
			t.Errorf("zipkin address %q: renderBootstrap = %v, want it refused", bad, err)
		}
	}
}

// The template renders exactly the typed envoy.config.bootstrap.v3.Bootstrap below (the
// form it replaced), for pods whose values need quoting, escaping or are left empty, and
// what it renders passes the Bootstrap's field rules, typed configs included.
func TestBootstrapMatchesTypedBuild(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
	}{
		{name: "golden pod", mutate: func(*Config) {}},
		{name: "no workload and no labels", mutate: func(c *Config) { c.Workload, c.Labels = "", nil }},
		{name: "values that need escaping", mutate: func(c *Config) {
			c.Labels = map[string]string{
				`quote"d`: `back\slash`, "html": "<a href=x>&amp;</a>", "ctl": "tab\there\nnewline",
				"unicode": "pod-é-中-\u2028", "app.kubernetes.io/name": "reviews", "empty": "",
			}
			c.Namespace, c.Pod, c.ServiceAccount = "ns-ü", `p"od`, "sa\\x"
			c.NodeID = `sidecar~10.244.0.3~p"od.ns~ns.svc.cluster.local`
			c.ServiceCluster = `<cluster>&"q\\`
			c.RunDir, c.XDSSocket = `/run/meshlab/l "x"/pods/p`, `/run/meshlab/l "x"/xds.sock`
		}},
		{name: "other ports", mutate: func(c *Config) { c.AdminPort, c.StatusPort = 15100, 1 }},
		{name: "secure metrics", mutate: func(c *Config) {
			c.SecureMetricsPort, c.SecureMergedMetricsPort, c.MetricsLocalhostOnly = 15091, 15092, true
		}},
		{name: "secure merged metrics only", mutate: func(c *Config) { c.SecureMergedMetricsPort = 15092 }},
		{name: "zipkin tracer", mutate: func(c *Config) { c.ZipkinAddress = "zipkin.istio-system:9411" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fixedPod()
			tc.mutate(&c)
			data, err := renderBootstrap(c)
			if err != nil {
				t.Fatal(err)
			}
			var got bootstrapv3.Bootstrap
			if err := protojson.Unmarshal(data, &got); err != nil {
				t.Fatalf("rendered bootstrap does not parse: %v\n%s", err, data)
			}
			want := typedBootstrap(t, c)
			if !proto.Equal(want, &got) {
				w, _ := marshalBootstrap(want)
				t.Errorf("rendered bootstrap differs from the typed one\ntyped:\n%s\nrendered:\n%s", w, data)
			}
			if err := got.ValidateAll(); err != nil {
				t.Errorf("rendered bootstrap: %v", err)
			}
			// admin access log, xds and sds-grpc http protocol options, and per listener an
			// HCM and a router; a secure listener's TLS inspector and TLS context too.
			anys := 7
			if c.ZipkinAddress != "" {
				anys++ // the Zipkin tracer's config
			}
			for _, p := range []uint16{c.SecureMetricsPort, c.SecureMergedMetricsPort} {
				if p != 0 {
					anys += 4
				}
			}
			if n := validateAnys(t, got.ProtoReflect()); n != anys {
				t.Errorf("validated %d typed configs, want %d", n, anys)
			}
		})
	}
}

// A value that is not UTF-8 is refused with its name (JSON cannot carry it; encoding/json
// would have replaced it quietly).
func TestBootstrapRefusesInvalidUTF8(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{name: "label value", mutate: func(c *Config) { c.Labels = map[string]string{"app": "a\xff"} }, want: `label "app"`},
		{name: "namespace", mutate: func(c *Config) { c.Namespace = "n\xfe" }, want: "NAMESPACE"},
		{name: "node id", mutate: func(c *Config) { c.NodeID = "s\xff" }, want: "node id"},
		{name: "xds socket", mutate: func(c *Config) { c.XDSSocket = "/x\xff" }, want: "xds socket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fixedPod()
			tc.mutate(&c)
			_, err := renderBootstrap(c)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "UTF-8") {
				t.Errorf("renderBootstrap = %v, want an error naming %s and UTF-8", err, tc.want)
			}
		})
	}
}

// validateAnys unpacks every Any under m, validates it and recurses into it; it returns
// how many it found.
func validateAnys(t *testing.T, m protoreflect.Message) int {
	t.Helper()
	n := 0
	if a, ok := m.Interface().(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		if err != nil {
			t.Fatalf("unpack %s: %v", a.GetTypeUrl(), err)
		}
		if v, ok := inner.(interface{ ValidateAll() error }); !ok {
			t.Errorf("%s has no ValidateAll", a.GetTypeUrl())
		} else if err := v.ValidateAll(); err != nil {
			t.Errorf("validate %s: %v", a.GetTypeUrl(), err)
		}
		return 1 + validateAnys(t, inner.ProtoReflect())
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				n += validateAnys(t, mv.Message())
				return true
			})
		case fd.IsList() && fd.Message() != nil:
			for i := range v.List().Len() {
				n += validateAnys(t, v.List().Get(i).Message())
			}
		case fd.Message() != nil && !fd.IsMap() && !fd.IsList():
			n += validateAnys(t, v.Message())
		}
		return true
	})
	return n
}

func TestWriteBootstrap(t *testing.T) {
	c := fixedPod()
	c.RunDir = t.TempDir()
	path, err := writeBootstrap(c, 3)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(c.RunDir, "envoy-rev3.json"); path != want {
		t.Errorf("path = %s, want %s", path, want)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("mode = %v, want 0644 (the proxy runs as 1337)", fi.Mode())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(data, &got); err != nil {
		t.Fatalf("parse written bootstrap: %v", err)
	}
	if !proto.Equal(&got, typedBootstrap(t, c)) {
		t.Errorf("written bootstrap does not parse back to the typed one")
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("temporary file left behind: %v", err)
	}
}

// Names in the bootstrap that xDS resources and Istio tooling refer to.
const (
	xdsClusterName         = "xds-grpc"
	prometheusClusterName  = "prometheus_stats"
	agentClusterName       = "agent"
	sdsClusterName         = "sds-grpc"
	httpProtocolOptionsKey = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
)

// typedBootstrap is the bootstrap of c built as a typed proto: the oracle the template is
// held to (the agent built it this way before it rendered the template).
func typedBootstrap(t *testing.T, c Config) *bootstrapv3.Bootstrap {
	t.Helper()
	meta, err := structpb.NewStruct(nodeMetadata(c))
	if err != nil {
		t.Fatalf("node metadata: %v", err)
	}
	ads := func() *corev3.ConfigSource {
		return &corev3.ConfigSource{
			ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
			InitialFetchTimeout:   durationpb.New(0),
			ResourceApiVersion:    corev3.ApiVersion_V3,
		}
	}
	stats := httpListener(t, "stats", PrometheusPort, "/stats/prometheus", prometheusClusterName)
	if c.MetricsLocalhostOnly {
		stats.Address = tcpAddress("127.0.0.1", PrometheusPort)
	}
	listeners := []*listenerv3.Listener{stats}
	if c.SecureMetricsPort != 0 {
		listeners = append(listeners, secureMetricsListener(t, "secure_stats", c.SecureMetricsPort, [2]string{"/stats/prometheus", prometheusClusterName}))
	}
	if c.SecureMergedMetricsPort != 0 {
		listeners = append(listeners, secureMetricsListener(t, "secure_merged_stats", c.SecureMergedMetricsPort,
			[2]string{"/stats/prometheus", agentClusterName}, [2]string{"/metrics", agentClusterName}))
	}
	listeners = append(listeners, httpListener(t, "agent", HealthPort, "/healthz/ready", agentClusterName))
	b := &bootstrapv3.Bootstrap{
		Node: &corev3.Node{
			Id:            c.NodeID,
			Cluster:       c.ServiceCluster,
			Metadata:      meta,
			UserAgentName: "envoy",
			UserAgentVersionType: &corev3.Node_UserAgentBuildVersion{UserAgentBuildVersion: &corev3.BuildVersion{
				Version: &typev3.SemanticVersion{MajorNumber: 1},
				Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{
					"build.label":     structpb.NewStringValue("dev"),
					"revision.status": structpb.NewStringValue("Clean"),
					"build.type":      structpb.NewStringValue("RELEASE"),
					"ssl.version":     structpb.NewStringValue("Go"),
				}},
			}},
		},
		StatsConfig: &metricsv3.StatsConfig{StatsTags: []*metricsv3.TagSpecifier{
			{TagName: "authz_enforce_result", TagValue: &metricsv3.TagSpecifier_Regex{Regex: `rbac(\.(allowed|denied))`}},
			{TagName: "authz_dry_run_action", TagValue: &metricsv3.TagSpecifier_Regex{Regex: `(\.istio_dry_run_(allow|deny)_)`}},
			{TagName: "authz_dry_run_result", TagValue: &metricsv3.TagSpecifier_Regex{Regex: `(\.shadow_(allowed|denied))`}},
		}},
		Admin: &bootstrapv3.Admin{
			AccessLog: []*accesslogv3.AccessLog{{
				Name:       "envoy.access_loggers.file",
				ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: mustAny(t, &filev3.FileAccessLog{Path: "/dev/null"})},
			}},
			Address: tcpAddress("127.0.0.1", uint32(c.AdminPort)),
		},
		DynamicResources: &bootstrapv3.Bootstrap_DynamicResources{
			LdsConfig: ads(),
			CdsConfig: ads(),
			AdsConfig: &corev3.ApiConfigSource{
				ApiType:                   corev3.ApiConfigSource_GRPC,
				SetNodeOnFirstMessageOnly: true,
				TransportApiVersion:       corev3.ApiVersion_V3,
				GrpcServices: []*corev3.GrpcService{{
					TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
						EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: xdsClusterName},
					},
				}},
			},
		},
		StaticResources: &bootstrapv3.Bootstrap_StaticResources{
			Clusters: []*clusterv3.Cluster{
				grpcPipeCluster(t, xdsClusterName, c.XDSSocket),
				grpcPipeCluster(t, sdsClusterName, SDSSocketPath(c.RunDir)),
				staticCluster(prometheusClusterName, tcpAddress("127.0.0.1", uint32(c.AdminPort))),
				staticCluster(agentClusterName, tcpAddress("127.0.0.1", uint32(c.StatusPort))),
			},
			Listeners: listeners,
		},
	}
	if c.ZipkinAddress != "" {
		// Istio's envoy_bootstrap.json with defaultConfig.tracing.zipkin.
		host, port, err := net.SplitHostPort(c.ZipkinAddress)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := strconv.Atoi(port)
		z := staticCluster("zipkin", tcpAddress(host, uint32(p)))
		z.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STRICT_DNS}
		// Deprecated in Envoy's API, still what Istio's template writes and Envoy honours.
		z.AltStatName, z.RespectDnsTtl, z.DnsLookupFamily = "zipkin;", true, clusterv3.Cluster_V4_ONLY //nolint:staticcheck // as Istio's envoy_bootstrap.json
		z.DnsRefreshRate, z.LbPolicy = durationpb.New(30*time.Second), clusterv3.Cluster_ROUND_ROBIN   //nolint:staticcheck // as Istio's envoy_bootstrap.json
		b.StaticResources.Clusters = append(b.StaticResources.Clusters, z)
		//nolint:staticcheck // Istio's bootstrap tracer is still the deprecated bootstrap field
		b.Tracing = &tracev3.Tracing{Http: &tracev3.Tracing_Http{Name: "envoy.tracers.zipkin", ConfigType: &tracev3.Tracing_Http_TypedConfig{
			TypedConfig: mustAny(t, &tracev3.ZipkinConfig{
				CollectorCluster: "zipkin", CollectorEndpoint: "/api/v2/spans", CollectorEndpointVersion: tracev3.ZipkinConfig_HTTP_JSON,
				TraceId_128Bit: true, SharedSpanContext: wrapperspb.Bool(false),
			}),
		}}}
	}
	return b
}

// secureMetricsListener is Istio's mTLS metrics listener on 0.0.0.0:port (its bootstrap's
// ENVOY_SECURE_METRICS_PORT and ENVOY_SECURE_MERGED_METRICS_PORT): TLS only, a client
// certificate of the mesh required (default and ROOTCA over sds-grpc), the HCM's routes
// each a path prefix to a cluster.
func secureMetricsListener(t *testing.T, statPrefix string, port uint16, routes ...[2]string) *listenerv3.Listener {
	t.Helper()
	l := httpListener(t, statPrefix, uint32(port), routes[0][0], routes[0][1])
	l.Name = fmt.Sprintf("0.0.0.0_%d", port)
	if len(routes) > 1 {
		var hcm hcmv3.HttpConnectionManager
		if err := l.FilterChains[0].Filters[0].GetTypedConfig().UnmarshalTo(&hcm); err != nil {
			t.Fatal(err)
		}
		vh := hcm.GetRouteConfig().VirtualHosts[0]
		for _, r := range routes[1:] {
			vh.Routes = append(vh.Routes, &routev3.Route{
				Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: r[0]}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: r[1]}}},
			})
		}
		l.FilterChains[0].Filters[0].ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, &hcm)}
	}
	sds := func(name string) *tlsv3.SdsSecretConfig {
		return &tlsv3.SdsSecretConfig{Name: name, SdsConfig: &corev3.ConfigSource{
			ResourceApiVersion: corev3.ApiVersion_V3,
			ConfigSourceSpecifier: &corev3.ConfigSource_ApiConfigSource{ApiConfigSource: &corev3.ApiConfigSource{
				ApiType:                   corev3.ApiConfigSource_GRPC,
				SetNodeOnFirstMessageOnly: true,
				TransportApiVersion:       corev3.ApiVersion_V3,
				GrpcServices: []*corev3.GrpcService{{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
					EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: sdsClusterName},
				}}},
			}},
		}}
	}
	l.ListenerFilters = []*listenerv3.ListenerFilter{{
		Name:       "envoy.filters.listener.tls_inspector",
		ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: mustAny(t, &tlsinspectorv3.TlsInspector{})},
	}}
	l.FilterChains[0].FilterChainMatch = &listenerv3.FilterChainMatch{TransportProtocol: "tls"}
	l.FilterChains[0].TransportSocket = &corev3.TransportSocket{
		Name: "envoy.transport_sockets.tls",
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(t, &tlsv3.DownstreamTlsContext{
			RequireClientCertificate: wrapperspb.Bool(true),
			CommonTlsContext: &tlsv3.CommonTlsContext{
				TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{sds("default")},
				ValidationContextType: &tlsv3.CommonTlsContext_CombinedValidationContext{CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
					DefaultValidationContext:         &tlsv3.CertificateValidationContext{},
					ValidationContextSdsSecretConfig: sds("ROOTCA"),
				}},
			},
		})},
	}
	return l
}

func mustAny(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func tcpAddress(ip string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Protocol:      corev3.SocketAddress_TCP,
		Address:       ip,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}

func staticCluster(name string, addr *corev3.Address) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		ConnectTimeout:       durationpb.New(time.Second),
		LoadAssignment: &endpointv3.ClusterLoadAssignment{
			ClusterName: name,
			Endpoints: []*endpointv3.LocalityLbEndpoints{{
				LbEndpoints: []*endpointv3.LbEndpoint{{
					HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: addr}},
				}},
			}},
		},
	}
}

// grpcPipeCluster is a gRPC upstream on a unix socket, spoken to over HTTP/2.
func grpcPipeCluster(t *testing.T, name, socket string) *clusterv3.Cluster {
	t.Helper()
	cl := staticCluster(name, &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: socket}}})
	cl.TypedExtensionProtocolOptions = map[string]*anypb.Any{httpProtocolOptionsKey: mustAny(t, &httpv3.HttpProtocolOptions{
		UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{
			ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
				ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{
					Http2ProtocolOptions: &corev3.Http2ProtocolOptions{},
				},
			},
		},
	})}
	return cl
}

// httpListener is a static 0.0.0.0:port listener whose HTTP connection manager routes
// one path prefix to one cluster, as Istio's 15090 and 15021 listeners.
func httpListener(t *testing.T, statPrefix string, port uint32, prefix, cluster string) *listenerv3.Listener {
	t.Helper()
	hcm := mustAny(t, &hcmv3.HttpConnectionManager{
		StatPrefix: statPrefix,
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			VirtualHosts: []*routev3.VirtualHost{{
				Name:    "backend",
				Domains: []string{"*"},
				Routes: []*routev3.Route{{
					Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: prefix}},
					Action: &routev3.Route_Route{Route: &routev3.RouteAction{
						ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster},
					}},
				}},
			}},
		}},
		HttpFilters: []*hcmv3.HttpFilter{{
			Name:       "envoy.filters.http.router",
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, &routerv3.Router{})},
		}},
	})
	return &listenerv3.Listener{
		Address: tcpAddress("0.0.0.0", port),
		FilterChains: []*listenerv3.FilterChain{{
			Filters: []*listenerv3.Filter{{
				Name:       "envoy.filters.network.http_connection_manager",
				ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcm},
			}},
		}},
	}
}
