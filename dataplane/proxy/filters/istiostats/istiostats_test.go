package istiostats

import (
	"bytes"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	udpav1 "github.com/cncf/xds/go/udpa/type/v1"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	statsapi "istio.io/api/envoy/extensions/stats"

	"github.com/meshlab/meshlab/dataplane/proxy/filters/peer"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

func setLocal(t *testing.T) {
	t.Helper()
	md, err := structpb.NewStruct(map[string]any{
		"NAME": "reviews-v2-abc", "NAMESPACE": "default", "CLUSTER_ID": "Kubernetes", "WORKLOAD_NAME": "reviews-v2",
		"ISTIO_VERSION": "1.31.0",
		"LABELS":        map[string]any{"app": "reviews", "version": "v2", peer.LabelCanonicalName: "reviews", peer.LabelCanonicalRevision: "v2"},
	})
	if err != nil {
		t.Fatal(err)
	}
	peer.SetLocal(&corev3.Node{Id: "sidecar~10.244.0.3~reviews-v2-abc.default~default.svc.cluster.local", Metadata: md})
}

func mustCompile(t *testing.T, m *statsapi.PluginConfig) *Config {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Compile(a)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func prom(t *testing.T, st *stats.Store) string {
	t.Helper()
	var b bytes.Buffer
	if err := st.WritePrometheus(&b, stats.Filter{}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func services(host, name string) *structpb.Struct {
	s, _ := structpb.NewStruct(map[string]any{"services": []any{map[string]any{"host": host, "name": name, "namespace": "default"}}})
	return s
}

// These tests set the process-wide local node, so they do not run in parallel.

func TestServerReporterLabels(t *testing.T) {
	setLocal(t)
	c := mustCompile(t, &statsapi.PluginConfig{DisableHostHeaderFallback: true})
	st := stats.NewStore()
	side := &Side{Inbound: true,
		Peer:    &peer.Workload{WorkloadName: "productpage-v1", Namespace: "default", App: "productpage", Version: "v1", CanonicalName: "productpage", CanonicalRevision: "v1", Cluster: "Kubernetes"},
		PeerSAN: "spiffe://cluster.local/ns/default/sa/bookinfo-productpage", LocalSAN: "spiffe://cluster.local/ns/default/sa/bookinfo-reviews",
		Host: "reviews:9080", Cluster: "inbound|9080||", ClusterIstio: services("reviews.default.svc.cluster.local", "reviews")}
	c.RecordHTTP(st, side, &Request{Code: 200, Flags: "-", Duration: 12 * time.Millisecond, RequestBytes: 0, ResponseBytes: 321})
	c.RecordHTTP(st, side, &Request{Code: 200, Flags: "-", Duration: 3 * time.Millisecond})
	want := `istio_requests_total{reporter="destination",source_workload="productpage-v1",source_canonical_service="productpage",` +
		`source_canonical_revision="v1",source_workload_namespace="default",source_principal="spiffe://cluster.local/ns/default/sa/bookinfo-productpage",` +
		`source_app="productpage",source_version="v1",source_cluster="Kubernetes",destination_workload="reviews-v2",` +
		`destination_workload_namespace="default",destination_principal="spiffe://cluster.local/ns/default/sa/bookinfo-reviews",` +
		`destination_app="reviews",destination_version="v2",destination_service="reviews.default.svc.cluster.local",` +
		`destination_canonical_service="reviews",destination_canonical_revision="v2",destination_service_name="reviews",` +
		`destination_service_namespace="default",destination_cluster="Kubernetes",request_protocol="http",response_code="200",` +
		`grpc_response_status="",response_flags="-",connection_security_policy="mutual_tls"} 2`
	out := prom(t, st)
	if !strings.Contains(out, want+"\n") {
		t.Fatalf("missing\n%s\nin\n%s", want, out)
	}
	for _, fam := range []string{"# TYPE istio_requests_total counter", "# TYPE istio_request_duration_milliseconds histogram",
		"# TYPE istio_request_bytes histogram", "# TYPE istio_response_bytes histogram"} {
		if !strings.Contains(out, fam) {
			t.Errorf("no %q", fam)
		}
	}
	if strings.Contains(out, "envoy_istio") || strings.Contains(out, "istiocustom") {
		t.Error("Istio metrics exported under Envoy's prefix or their namespace")
	}
	if !strings.Contains(out, `istio_request_duration_milliseconds_count{reporter="destination"`) {
		t.Error("no duration histogram samples")
	}
}

// TestWaypointReporterLabels pins reporter SERVER_GATEWAY as istio-proxy reports it in
// a waypoint: the source from the downstream peer and the HBONE principals, the
// destination from the upstream peer (the workload the request went to, its identity the
// principal) and the cluster's service, "unknown" for what neither knows, never the
// waypoint's own node.
func TestWaypointReporterLabels(t *testing.T) {
	setLocal(t)
	c := mustCompile(t, &statsapi.PluginConfig{Reporter: statsapi.Reporter_SERVER_GATEWAY, DisableHostHeaderFallback: true})
	st := stats.NewStore()
	side := &Side{
		Peer:     &peer.Workload{WorkloadName: "curl", Namespace: "default", App: "curl", Version: "latest", CanonicalName: "curl", CanonicalRevision: "latest", Cluster: "Kubernetes"},
		PeerKey:  "k",
		Upstream: &peer.Workload{WorkloadName: "httpbin", Namespace: "default", App: "httpbin", Version: "v1", CanonicalName: "httpbin", CanonicalRevision: "v1", Cluster: "Kubernetes", Identity: "spiffe://cluster.local/ns/default/sa/httpbin"},
		PeerSAN:  "spiffe://cluster.local/ns/default/sa/curl", LocalSAN: "spiffe://cluster.local/ns/default/sa/waypoint",
		Host: "httpbin:8000", Cluster: "inbound-vip|8000|http|httpbin.default.svc.cluster.local", ClusterIstio: services("httpbin.default.svc.cluster.local", "httpbin")}
	c.RecordHTTP(st, side, &Request{Code: 200, Flags: "-"})
	want := `istio_requests_total{reporter="waypoint",source_workload="curl",source_canonical_service="curl",source_canonical_revision="latest",` +
		`source_workload_namespace="default",source_principal="spiffe://cluster.local/ns/default/sa/curl",source_app="curl",source_version="latest",` +
		`source_cluster="Kubernetes",destination_workload="httpbin",destination_workload_namespace="default",` +
		`destination_principal="spiffe://cluster.local/ns/default/sa/httpbin",destination_app="httpbin",destination_version="v1",` +
		`destination_service="httpbin.default.svc.cluster.local",destination_canonical_service="httpbin",destination_canonical_revision="v1",` +
		`destination_service_name="httpbin",destination_service_namespace="default",destination_cluster="Kubernetes",request_protocol="http",` +
		`response_code="200",grpc_response_status="",response_flags="-",connection_security_policy="mutual_tls"} 1`
	if out := prom(t, st); !strings.Contains(out, want+"\n") {
		t.Fatalf("missing\n%s\nin\n%s", want, out)
	}
	// Neither peer known, no principals: unknown everywhere istio-proxy says so (its
	// canonical revision included), the service still from the cluster, and none
	// of the waypoint's own labels.
	st = stats.NewStore()
	c.RecordHTTP(st, &Side{Cluster: side.Cluster, ClusterIstio: side.ClusterIstio}, &Request{Code: 403, Flags: "-"})
	out := prom(t, st)
	for _, l := range []string{`reporter="waypoint"`, `source_workload="unknown"`, `source_canonical_revision="latest"`,
		`destination_workload="unknown"`, `destination_canonical_revision="unknown"`, `destination_principal="unknown"`,
		`destination_service_name="httpbin"`, `response_code="403"`, `connection_security_policy="none"`} {
		if !strings.Contains(out, l) {
			t.Errorf("no %s in\n%s", l, out)
		}
	}
	if strings.Contains(out, "reviews") {
		t.Errorf("the waypoint's own node in its labels:\n%s", out)
	}
	// A TCP chain: no upstream peer, the destination from the endpoint's metadata.
	st = stats.NewStore()
	tcp := c.StartTCP(st, &fakeTCP{read: true, side: &Side{Peer: side.Peer, PeerSAN: side.PeerSAN, LocalSAN: side.LocalSAN,
		Endpoint: "mongodb-v1;default;mongodb;v1;Kubernetes", Cluster: "inbound-vip|27017|tcp|mongodb.default.svc.cluster.local",
		ClusterIstio: services("mongodb.default.svc.cluster.local", "mongodb")}})
	tcp.Close()
	out = prom(t, st)
	for _, l := range []string{`istio_tcp_connections_opened_total{reporter="waypoint",source_workload="curl"`, `destination_workload="mongodb-v1"`,
		`destination_workload_namespace="default"`, `destination_canonical_service="mongodb"`, `destination_canonical_revision="v1"`,
		`destination_cluster="Kubernetes"`, `destination_service_name="mongodb"`} {
		if !strings.Contains(out, l) {
			t.Errorf("no %s in\n%s", l, out)
		}
	}
}

func TestClientReporterFallsBackToEndpointAndHost(t *testing.T) {
	setLocal(t)
	c := mustCompile(t, &statsapi.PluginConfig{})
	st := stats.NewStore()
	side := &Side{Endpoint: "ratings-v1;default;ratings;v1;Kubernetes", Host: "ratings:9080", Cluster: "outbound|9080||ratings.default.svc.cluster.local",
		PeerSAN: "spiffe://cluster.local/ns/default/sa/bookinfo-ratings"}
	c.RecordHTTP(st, side, &Request{Code: 503, Flags: "UF", GRPC: true, GRPCStatus: "14"})
	out := prom(t, st)
	for _, l := range []string{`reporter="source"`, `source_workload="reviews-v2"`, `destination_workload="ratings-v1"`,
		`destination_canonical_revision="v1"`, `destination_service="ratings:9080"`, `destination_service_name="ratings:9080"`,
		`destination_principal="spiffe://cluster.local/ns/default/sa/bookinfo-ratings"`, `destination_app="unknown"`,
		`request_protocol="grpc"`, `response_code="503"`, `grpc_response_status="14"`, `response_flags="UF"`,
		`connection_security_policy="unknown"`, `source_principal="unknown"`} {
		if !strings.Contains(out, l) {
			t.Errorf("no %s in\n%s", l, out)
		}
	}
	// Passthrough: the service name is the cluster's.
	st = stats.NewStore()
	c.RecordHTTP(st, &Side{Cluster: "PassthroughCluster", Host: "1.2.3.4"}, &Request{Code: 200, Flags: "-"})
	if !strings.Contains(prom(t, st), `destination_service_name="PassthroughCluster"`) {
		t.Error("passthrough not named")
	}
}

func TestOverridesAndRefusals(t *testing.T) {
	setLocal(t)
	c := mustCompile(t, &statsapi.PluginConfig{Metrics: []*statsapi.MetricConfig{
		{Name: "request_bytes", Drop: true},
		{TagsToRemove: []string{"source_principal", "not_a_tag"}},
	}})
	st := stats.NewStore()
	c.RecordHTTP(st, &Side{Inbound: true}, &Request{Code: 200, Flags: "-"})
	out := prom(t, st)
	if strings.Contains(out, "istio_request_bytes") || strings.Contains(out, "source_principal") || !strings.Contains(out, "istio_requests_total{") {
		t.Fatalf("drop / tags_to_remove not applied:\n%s", out)
	}
	// A TypedStruct wrapping the same config compiles as the typed one.
	v, _ := structpb.NewStruct(map[string]any{"disable_host_header_fallback": true, "tcp_reporting_duration": "2s"})
	a, _ := anypb.New(&udpav1.TypedStruct{TypeUrl: "type.googleapis.com/stats.PluginConfig", Value: v})
	tc, err := Compile(a)
	if err != nil || !tc.DisableHostHeaderFallback || tc.TCPReportInterval != 2*time.Second {
		t.Fatalf("TypedStruct: %+v %v", tc, err)
	}
	for _, tc := range []struct {
		m    *statsapi.PluginConfig
		want string
	}{
		{&statsapi.PluginConfig{Definitions: []*statsapi.MetricDefinition{{Name: "x", Value: "1"}}}, "definitions"},
		{&statsapi.PluginConfig{Reporter: statsapi.Reporter(7)}, "reporter"},
		{&statsapi.PluginConfig{Metrics: []*statsapi.MetricConfig{{Name: "my_metric"}}}, "metrics[0].name"},
	} {
		a, _ := anypb.New(tc.m)
		if _, err := Compile(a); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err %v, want it to name %s", err, tc.want)
		}
	}
}

// TestDimensions holds what the Telemetry API's tagOverrides become in istio-proxy: the
// customize-metrics page's request_host and destination_port added to requests_total
// only, in the tags' order after the standard ones; the telemetry-api page's peer label
// (upstream_peer.labels['app'].value); a standard tag overridden; an expression that
// fails reports "unknown"; one that does not parse drops a standard tag and adds no
// other.
func TestDimensions(t *testing.T) {
	setLocal(t)
	c := mustCompile(t, &statsapi.PluginConfig{Metrics: []*statsapi.MetricConfig{
		{Name: "requests_total", Dimensions: map[string]string{
			"request_host": "request.host", "destination_port": "string(destination.port)",
			"destination_x": "upstream_peer.labels['app'].value", "response_code": "'overridden'",
			"missing": "request.headers['x-none']", "source_app": "((", "broken": "((",
		}},
	}})
	if !c.HasDimensions() {
		t.Fatal("HasDimensions false with dimensions")
	}
	st := stats.NewStore()
	req, err := http.NewRequest(http.MethodGet, "http://reviews:9080/reviews/0", nil)
	if err != nil {
		t.Fatal(err)
	}
	up := &peer.Workload{WorkloadName: "ratings-v1", App: "ratings"}
	side := &Side{Peer: up, Host: "reviews:9080"}
	attrs := &Attributes{Request: req, Local: netip.MustParseAddrPort("10.96.0.12:9080"), UpstreamPeer: up}
	c.RecordHTTP(st, side, &Request{Code: 200, Flags: "-", Attrs: attrs})
	out := prom(t, st)
	line := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "istio_requests_total{") {
			line = l
		}
	}
	for _, want := range []string{`response_code="overridden"`, `,destination_port="9080",destination_x="ratings",missing="unknown",request_host="reviews:9080"} 1`} {
		if !strings.Contains(line, want) {
			t.Errorf("istio_requests_total: want %s in\n%s", want, line)
		}
	}
	if strings.Contains(line, "source_app=") || strings.Contains(line, "broken=") {
		t.Errorf("a dimension that does not parse: want source_app dropped and broken absent:\n%s", line)
	}
	if strings.Contains(out, "istio_request_bytes_bucket{") && strings.Contains(out, "request_host") {
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "istio_request_bytes") && strings.Contains(l, "request_host") {
				t.Fatalf("request_bytes has requests_total's dimension: %s", l)
			}
		}
	}
	// A later tags_to_remove wins over an earlier dimension of the same tag, and a
	// later dimension over an earlier removal, as in istio-proxy's one override map.
	c = mustCompile(t, &statsapi.PluginConfig{Metrics: []*statsapi.MetricConfig{
		{Name: "requests_total", Dimensions: map[string]string{"source_app": "'a'"}},
		{Name: "requests_total", TagsToRemove: []string{"source_app", "destination_app"}},
		{Name: "requests_total", Dimensions: map[string]string{"destination_app": "'d'"}},
	}})
	st = stats.NewStore()
	c.RecordHTTP(st, side, &Request{Code: 200, Flags: "-", Attrs: attrs})
	line = ""
	for _, l := range strings.Split(prom(t, st), "\n") {
		if strings.HasPrefix(l, "istio_requests_total{") {
			line = l
		}
	}
	if strings.Contains(line, "source_app=") || !strings.Contains(line, `destination_app="d"`) {
		t.Errorf("remove then dimension:\n%s", line)
	}
}

func TestParseDimension(t *testing.T) {
	for _, ok := range []string{"request.host", "string(destination.port)", `has(request.host) ? request.host : "unknown"`, "upstream_peer.labels['app'].value"} {
		if err := ParseDimension(ok); err != nil {
			t.Errorf("ParseDimension(%q): %v", ok, err)
		}
	}
	if err := ParseDimension("(("); err == nil {
		t.Error("ParseDimension((() = nil")
	}
}

func FuzzParseDimension(f *testing.F) {
	f.Add("request.host")
	f.Add(`has(request.host) ? request.host : "unknown"`)
	f.Fuzz(func(t *testing.T, expr string) {
		if ParseDimension(expr) != nil {
			return
		}
		var s exprSet
		if id := s.compile(expr); id >= 0 {
			c := &Config{exprs: s}
			_ = c.evaluate(&Request{Attrs: &Attributes{}})
		}
	})
}

type fakeTCP struct {
	side       *Side
	read       bool
	sent, recv int64
}

func (f *fakeTCP) Side() (*Side, bool)   { return f.side, f.read }
func (f *fakeTCP) Bytes() (int64, int64) { return f.sent, f.recv }
func (f *fakeTCP) Flags() string         { return "-" }

func TestTCPReportsOpenBytesAndClose(t *testing.T) {
	setLocal(t)
	c := mustCompile(t, &statsapi.PluginConfig{TcpReportingDuration: durationpb.New(time.Hour)})
	st := stats.NewStore()
	src := &fakeTCP{side: &Side{Inbound: true, Peer: &peer.Workload{WorkloadName: "sleep", Namespace: "default"}}}
	conn := c.StartTCP(st, src)
	src.sent, src.recv = 10, 4
	conn.report(false) // the peer is not known yet: nothing reported
	if strings.Contains(prom(t, st), "istio_tcp") {
		t.Fatal("reported before the peer was read")
	}
	src.read = true
	conn.report(false)
	src.sent, src.recv = 25, 9
	conn.Close()
	conn.Close()
	out := prom(t, st)
	for _, l := range []string{"istio_tcp_connections_opened_total{", "istio_tcp_connections_closed_total{"} {
		if !strings.Contains(out, l) {
			t.Errorf("no %s", l)
		}
	}
	tags := `{reporter="destination",source_workload="sleep",`
	for metric, v := range map[string]string{TCPOpened: "1", TCPClosed: "1", TCPSent: "25", TCPReceived: "9"} {
		found := false
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, metric+tags) && strings.HasSuffix(line, `request_protocol="tcp",response_flags="-",connection_security_policy="none"} `+v) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s != %s in\n%s", metric, v, out)
		}
	}
}

func TestBuildGauge(t *testing.T) {
	setLocal(t)
	st := stats.NewStore()
	RecordBuild(st, peer.Local().Metadata)
	if !strings.Contains(prom(t, st), `istio_build{component="proxy",tag="1.31.0"} 1`) {
		t.Fatal(prom(t, st))
	}
}

// The metrics cache gives a repeated request the same series, and a changed input
// (here the cluster's metadata after a CDS update) a new one.
func TestMetricsCache(t *testing.T) {
	setLocal(t)
	c := mustCompile(t, &statsapi.PluginConfig{})
	st := stats.NewStore()
	side := &Side{Peer: &peer.Workload{WorkloadName: "ratings-v1"}, PeerKey: "hdr", Cluster: "outbound|9080||ratings.default.svc.cluster.local",
		ClusterIstio: services("ratings.default.svc.cluster.local", "ratings")}
	for range 3 {
		c.RecordHTTP(st, side, &Request{Code: 200, Flags: "-"})
	}
	side2 := *side
	side2.ClusterIstio = services("ratings2.default.svc.cluster.local", "ratings2")
	c.RecordHTTP(st, &side2, &Request{Code: 200, Flags: "-"})
	out := prom(t, st)
	if !strings.Contains(out, `destination_service_name="ratings",`) || !strings.Contains(out, `destination_service_name="ratings2",`) {
		t.Fatalf("cache kept a stale series:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "istio_requests_total{") && strings.Contains(line, `destination_service_name="ratings",`) && !strings.HasSuffix(line, " 3") {
			t.Fatalf("cached series count: %s", line)
		}
	}
}
