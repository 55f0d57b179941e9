package metrics

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/meshlab/meshlab/ambientapi/workload"
)

var (
	productpage = &workload.Workload{
		Uid: "Kubernetes//Pod/default/productpage-v1-1", Name: "productpage-v1-1", Namespace: "default",
		ServiceAccount: "bookinfo-productpage", WorkloadName: "productpage-v1", CanonicalName: "productpage", CanonicalRevision: "v1",
	}
	reviews = &workload.Workload{
		Uid: "Kubernetes//Pod/default/reviews-v1-1", Name: "reviews-v1-1", Namespace: "default", TrustDomain: "example.org",
		ServiceAccount: "bookinfo-reviews", WorkloadName: "reviews-v1", CanonicalName: "reviews", CanonicalRevision: "v1", ClusterId: "c1",
		Locality: &workload.Locality{Region: "r", Zone: "z"},
	}
	reviewsSvc = &ServiceDescription{Hostname: "reviews.default.svc.cluster.local", Name: "reviews", Namespace: "default"}
)

func TestLabelsFor(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		open Open
		want string
	}{
		{
			name: "outbound HBONE between known workloads",
			open: Open{Reporter: Source, Source: productpage, Destination: reviews, DestinationService: reviewsSvc, SecurityPolicy: MutualTLS},
			want: `{reporter="source",source_workload="productpage-v1",source_canonical_service="productpage",source_canonical_revision="v1",source_workload_namespace="default",source_principal="unknown",source_app="productpage",source_version="v1",source_cluster="Kubernetes",destination_service="reviews.default.svc.cluster.local",destination_service_namespace="default",destination_service_name="reviews",destination_workload="reviews-v1",destination_canonical_service="reviews",destination_canonical_revision="v1",destination_workload_namespace="default",destination_principal="spiffe://example.org/ns/default/sa/bookinfo-reviews",destination_app="reviews",destination_version="v1",destination_cluster="c1",request_protocol="tcp",response_flags="-",connection_security_policy="mutual_tls",source_region="unknown",source_zone="unknown",destination_region="r",destination_zone="z"}`,
		},
		{
			name: "inbound: the handshake's identity is the principal, the known source the rest",
			open: Open{Reporter: Destination, Source: productpage, DerivedSource: &Derived{Identity: "spiffe://cluster.local/ns/default/sa/bookinfo-productpage", WorkloadName: "other"}, Destination: reviews, SecurityPolicy: MutualTLS},
			want: `{reporter="destination",source_workload="productpage-v1",source_canonical_service="productpage",source_canonical_revision="v1",source_workload_namespace="default",source_principal="spiffe://cluster.local/ns/default/sa/bookinfo-productpage",source_app="productpage",source_version="v1",source_cluster="Kubernetes",destination_service="unknown",destination_service_namespace="unknown",destination_service_name="unknown",destination_workload="reviews-v1",destination_canonical_service="reviews",destination_canonical_revision="v1",destination_workload_namespace="default",destination_principal="spiffe://example.org/ns/default/sa/bookinfo-reviews",destination_app="reviews",destination_version="v1",destination_cluster="c1",request_protocol="tcp",response_flags="-",connection_security_policy="mutual_tls",source_region="unknown",source_zone="unknown",destination_region="r",destination_zone="z"}`,
		},
		{
			name: "passthrough to nobody known: everything unknown, no locality",
			open: Open{Reporter: Source},
			want: `{reporter="source",source_workload="unknown",source_canonical_service="unknown",source_canonical_revision="unknown",source_workload_namespace="unknown",source_principal="unknown",source_app="unknown",source_version="unknown",source_cluster="unknown",destination_service="unknown",destination_service_namespace="unknown",destination_service_name="unknown",destination_workload="unknown",destination_canonical_service="unknown",destination_canonical_revision="unknown",destination_workload_namespace="unknown",destination_principal="unknown",destination_app="unknown",destination_version="unknown",destination_cluster="unknown",request_protocol="tcp",response_flags="-",connection_security_policy="unknown"}`,
		},
		{
			name: "derived only: its workload name is the app",
			open: Open{Reporter: Destination, DerivedSource: &Derived{WorkloadName: "w", App: "a", Revision: "r", Namespace: "n", ClusterID: "c", Identity: "spiffe://td/ns/n/sa/s"}},
			want: `{reporter="destination",source_workload="w",source_canonical_service="a",source_canonical_revision="r",source_workload_namespace="n",source_principal="spiffe://td/ns/n/sa/s",source_app="w",source_version="r",source_cluster="c",destination_service="unknown",destination_service_namespace="unknown",destination_service_name="unknown",destination_workload="unknown",destination_canonical_service="unknown",destination_canonical_revision="unknown",destination_workload_namespace="unknown",destination_principal="unknown",destination_app="unknown",destination_version="unknown",destination_cluster="unknown",request_protocol="tcp",response_flags="-",connection_security_policy="unknown",source_region="unknown",source_zone="unknown",destination_region="unknown",destination_zone="unknown"}`,
		},
	}
	for _, tc := range cases {
		if got := formatLabels(LabelsFor(tc.open).Pairs()); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

func TestRegistryText(t *testing.T) {
	t.Parallel()
	r := New()
	ok := r.Open(Open{Reporter: Source, Source: productpage, Destination: reviews, DestinationService: reviewsSvc, SecurityPolicy: MutualTLS})
	ok.AddReceived(100)
	ok.AddSent(2000)
	res := ok.Close(FlagNone)
	if res.Sent != 2000 || res.Received != 100 || res.Labels.ResponseFlags != FlagNone {
		t.Errorf("Close = %+v", res)
	}
	if again := ok.Close(FlagDenied); again.Sent != 2000 {
		t.Errorf("second Close = %+v", again)
	}
	denied := r.Open(Open{Reporter: Destination})
	denied.Close(FlagDenied)
	r.SocketOpened(Source)
	r.SocketOpened(Source)
	r.SocketClosed(Source)

	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	okLabels := formatLabels(ok.Labels().Pairs())
	deniedOpen := formatLabels(denied.Labels().Pairs())
	deniedClosed := strings.Replace(deniedOpen, `response_flags="-"`, `response_flags="DENY"`, 1)
	for _, want := range []string{
		"# HELP istio_tcp_connections_opened The total number of TCP connections opened.\n# TYPE istio_tcp_connections_opened counter\n",
		"istio_tcp_connections_opened_total" + okLabels + " 1\n",
		"istio_tcp_connections_closed_total" + okLabels + " 1\n",
		"istio_tcp_received_bytes_total" + okLabels + " 100\n",
		"istio_tcp_sent_bytes_total" + okLabels + " 2000\n",
		"istio_tcp_connections_opened_total" + deniedOpen + " 1\n",
		"istio_tcp_sent_bytes_total" + deniedOpen + " 0\n",
		"istio_tcp_connections_closed_total" + deniedClosed + " 1\n",
		"istio_tcp_connections_failed_total" + deniedClosed + " 1\n",
		`istio_tcp_sockets_open{reporter="source"} 1` + "\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q:\n%s", want, text)
		}
	}
	for _, never := range []string{
		"istio_tcp_connections_closed_total" + deniedOpen,
		"istio_tcp_connections_failed_total" + okLabels,
		`istio_tcp_sockets_open{reporter="destination"}`,
	} {
		if strings.Contains(text, never) {
			t.Errorf("metrics hold %q:\n%s", never, text)
		}
	}
	if !strings.HasSuffix(text, "# EOF\n") {
		t.Errorf("metrics do not end in # EOF")
	}

	fams, err := Families(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	f := fams["istio_tcp_connections_opened_total"]
	if f.GetType() != dto.MetricType_COUNTER || len(f.GetMetric()) != 2 {
		t.Fatalf("opened family = %v", f)
	}
	if g := fams["istio_tcp_sockets_open"]; g.GetType() != dto.MetricType_GAUGE || g.GetMetric()[0].GetGauge().GetValue() != 1 {
		t.Errorf("sockets family = %v", g)
	}
	if _, ok := fams["istio_tcp_connections_opened"]; ok {
		t.Error("an empty family under the OpenMetrics name survived")
	}
}

func TestHandler(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(New().Handler())
	t.Cleanup(srv.Close)
	cases := []struct{ path, accept, wantType string }{
		{"/metrics", "", "text/plain; charset=utf-8"},
		{"/stats/prometheus", "application/openmetrics-text; version=1.0.0, text/plain", "application/openmetrics-text;charset=utf-8;version=1.0.0"},
	}
	for _, tc := range cases {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+tc.path, nil)
		if tc.accept != "" {
			req.Header.Set("Accept", tc.accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != tc.wantType {
			t.Errorf("%s: %d %q, want 200 %q", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), tc.wantType)
		}
	}
	resp, err := http.Get(srv.URL + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/stats: %d, want 404", resp.StatusCode)
	}
}

// TestConcurrent: the copy loops of many connections count at once.
func TestConcurrent(t *testing.T) {
	t.Parallel()
	r := New()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				c := r.Open(Open{Reporter: Source, Destination: reviews, SecurityPolicy: MutualTLS})
				c.AddSent(1)
				c.AddReceived(2)
				c.Close(FlagNone)
				_ = r.WriteText(&strings.Builder{})
			}
		}()
	}
	wg.Wait()
	var b strings.Builder
	_ = r.WriteText(&b)
	fams, err := Families(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if v := fams["istio_tcp_received_bytes_total"].GetMetric()[0].GetCounter().GetValue(); v != 1600 {
		t.Errorf("received = %v, want 1600", v)
	}
}

func TestEscapes(t *testing.T) {
	t.Parallel()
	if got, want := formatLabels([][2]string{{"a", "x\"y\\z\nw"}}), `{a="x\"y\\z\nw"}`; got != want {
		t.Errorf("formatLabels = %s, want %s", got, want)
	}
}
