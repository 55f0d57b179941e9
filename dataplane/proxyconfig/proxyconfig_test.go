package proxyconfig

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// The dumps under testdata/dumps are a real lab's: `meshlab up` (hello) and the bookinfo
// lab with a reviews DestinationRule (subsets, outlier detection) and a header-matched
// VirtualService, read from each pod's agent at /admin/config_dump?include_eds and
// /admin/clusters?format=json. fidelity/istioctl_test.go prints the same dumps with
// istioctl's own writers and compares.
var dumpCases = []string{"hello-frontend-v1", "bookinfo-productpage-v1", "bookinfo-reviews-v2"}

// certClock is inside the validity of the dumps' workload certificates (issued
// 2026-11-26 09:33 UTC for 24h).
var certClock = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

// view is one proxy-config invocation.
type view struct {
	name  string
	print func(w Writer, d *ConfigDump, c *Clusters) error
}

var views = []view{
	{"clusters", func(w Writer, d *ConfigDump, _ *Clusters) error { return w.Clusters(d, ClusterFilter{}, Short) }},
	{"clusters-outbound-9080", func(w Writer, d *ConfigDump, _ *Clusters) error {
		return w.Clusters(d, ClusterFilter{Port: 9080, Direction: Outbound}, Short)
	}},
	{"clusters-fqdn-reviews-subset-v2", func(w Writer, d *ConfigDump, _ *Clusters) error {
		return w.Clusters(d, ClusterFilter{FQDN: "reviews", Subset: "v2"}, Short)
	}},
	{"listeners", func(w Writer, d *ConfigDump, _ *Clusters) error {
		return w.Listeners(d, ListenerFilter{Verbose: true}, Short)
	}},
	{"listeners-short", func(w Writer, d *ConfigDump, _ *Clusters) error {
		return w.Listeners(d, ListenerFilter{}, Short)
	}},
	{"listeners-port-15006", func(w Writer, d *ConfigDump, _ *Clusters) error {
		return w.Listeners(d, ListenerFilter{Port: 15006, Verbose: true}, Short)
	}},
	{"listeners-type-http-address-0.0.0.0", func(w Writer, d *ConfigDump, _ *Clusters) error {
		return w.Listeners(d, ListenerFilter{Type: "http", Address: "0.0.0.0", Verbose: true}, Short)
	}},
	{"routes", func(w Writer, d *ConfigDump, _ *Clusters) error {
		return w.Routes(d, RouteFilter{Verbose: true}, Short)
	}},
	{"routes-short", func(w Writer, d *ConfigDump, _ *Clusters) error { return w.Routes(d, RouteFilter{}, Short) }},
	{"routes-name-9080", func(w Writer, d *ConfigDump, _ *Clusters) error {
		return w.Routes(d, RouteFilter{Name: "9080", Verbose: true}, Short)
	}},
	{"endpoints", func(w Writer, _ *ConfigDump, c *Clusters) error { return w.Endpoints(c, EndpointFilter{}, Short) }},
	{"endpoints-status-healthy-port-9080", func(w Writer, _ *ConfigDump, c *Clusters) error {
		return w.Endpoints(c, EndpointFilter{Status: "healthy", Port: 9080}, Short)
	}},
	{"secrets", func(w Writer, d *ConfigDump, _ *Clusters) error { return w.Secrets(d, Short) }},
	{"bootstrap", func(w Writer, d *ConfigDump, _ *Clusters) error { return w.Bootstrap(d, Short) }},
	{"all", func(w Writer, d *ConfigDump, _ *Clusters) error {
		return w.All(d, AllFilter{Listener: ListenerFilter{Verbose: true}, Route: RouteFilter{Verbose: true}}, Short)
	}},
	{"all-with-headers-port-9080", func(w Writer, d *ConfigDump, _ *Clusters) error {
		return w.All(d, AllFilter{
			Cluster: ClusterFilter{Port: 9080}, Listener: ListenerFilter{Port: 9080, Verbose: true},
			Route: RouteFilter{Verbose: true}, Endpoint: EndpointFilter{Port: 9080}, WithHeaders: true,
		}, Short)
	}},
	{"clusters-json-outbound-9080", func(w Writer, d *ConfigDump, _ *Clusters) error {
		return w.Clusters(d, ClusterFilter{Port: 9080, Direction: Outbound}, JSON)
	}},
	{"routes-yaml-name-9080", func(w Writer, d *ConfigDump, _ *Clusters) error {
		return w.Routes(d, RouteFilter{Name: "9080"}, YAML)
	}},
}

func loadCase(t *testing.T, name string) (*ConfigDump, *Clusters) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "dumps", name+".config_dump.json"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := ParseConfigDump(b)
	if err != nil {
		t.Fatal(err)
	}
	b, err = os.ReadFile(filepath.Join("testdata", "dumps", name+".clusters.json"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseClusters(b)
	if err != nil {
		t.Fatal(err)
	}
	return d, c
}

// TestGolden prints every view of every dump and compares it with
// testdata/<dump>/<view>.golden.
func TestGolden(t *testing.T) {
	for _, dc := range dumpCases {
		d, c := loadCase(t, dc)
		for _, v := range views {
			t.Run(dc+"/"+v.name, func(t *testing.T) {
				var out bytes.Buffer
				if err := v.print(Writer{Out: &out, Now: func() time.Time { return certClock }}, d, c); err != nil {
					t.Fatal(err)
				}
				testutil.Golden(t, dc+"/"+v.name, out.Bytes())
			})
		}
	}
}

// TestTablesShowWhatTheProxyHolds checks facts of the bookinfo dumps directly, so a
// golden refreshed by mistake cannot hide them.
func TestTablesShowWhatTheProxyHolds(t *testing.T) {
	d, c := loadCase(t, "bookinfo-productpage-v1")
	render := func(f func(w Writer) error) string {
		t.Helper()
		var out bytes.Buffer
		if err := f(Writer{Out: &out, Now: func() time.Time { return certClock }}); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	clusters := render(func(w Writer) error { return w.Clusters(d, ClusterFilter{FQDN: "reviews"}, Short) })
	// istioctl shows <unknown> for a DestinationRule it cannot find in a cluster's
	// istio.config metadata, and 0.0.0 for a proxy without a structured build version.
	if all := render(func(w Writer) error { return w.Clusters(d, ClusterFilter{}, Short) }); strings.Contains(all, "<unknown>") {
		t.Errorf("clusters shows an <unknown> DestinationRule:\n%s", all)
	}
	if boot := render(func(w Writer) error { return w.Bootstrap(d, Short) }); !strings.Contains(boot, "Envoy Version: 1.0.0-dev/Clean/RELEASE/Go") {
		t.Errorf("bootstrap does not show the proxy's build version:\n%s", boot)
	}
	for _, want := range []string{
		"SERVICE FQDN", "DESTINATION RULE",
		"reviews.default.svc.cluster.local     9080     v2         outbound      EDS      reviews.default",
	} {
		if !strings.Contains(clusters, want) {
			t.Errorf("clusters --fqdn reviews lacks %q:\n%s", want, clusters)
		}
	}
	if strings.Contains(clusters, "details") {
		t.Errorf("clusters --fqdn reviews shows details:\n%s", clusters)
	}

	routes := render(func(w Writer) error { return w.Routes(d, RouteFilter{Name: "9080", Verbose: true}, Short) })
	if !strings.Contains(routes, "reviews.default") || !strings.Contains(routes, "VIRTUAL SERVICE") {
		t.Errorf("routes --name 9080 does not name the reviews VirtualService:\n%s", routes)
	}
	for _, l := range strings.Split(strings.TrimSpace(routes), "\n")[1:] {
		if !strings.HasPrefix(l, "9080 ") {
			t.Errorf("routes --name 9080 shows another route: %q", l)
		}
	}

	listeners := render(func(w Writer) error { return w.Listeners(d, ListenerFilter{Port: 15006, Verbose: true}, Short) })
	for _, want := range []string{"MATCH", "DESTINATION", "Trans: tls", "InboundPassthroughCluster"} {
		if !strings.Contains(listeners, want) {
			t.Errorf("listeners --port 15006 lacks %q:\n%s", want, listeners)
		}
	}

	eps := render(func(w Writer) error { return w.Endpoints(c, EndpointFilter{}, Short) })
	if !strings.Contains(eps, "OUTLIER CHECK") || !strings.Contains(eps, "HEALTHY     OK") {
		t.Errorf("endpoints lack health and outlier state:\n%s", eps)
	}

	secrets := render(func(w Writer) error { return w.Secrets(d, Short) })
	for _, want := range []string{"RESOURCE NAME", "NOT AFTER", "default", "Cert Chain", "ROOTCA", "CA", "true"} {
		if !strings.Contains(secrets, want) {
			t.Errorf("secrets lack %q:\n%s", want, secrets)
		}
	}
	expired := Writer{Out: &bytes.Buffer{}, Now: func() time.Time { return certClock.Add(48 * time.Hour) }}
	if err := expired.Secrets(d, Short); err != nil {
		t.Fatal(err)
	}
	if s := expired.Out.(*bytes.Buffer).String(); !strings.Contains(s, "Cert Chain     ACTIVE     false") {
		t.Errorf("a workload certificate past its NOT AFTER is shown valid:\n%s", s)
	}
}

// TestOutlierEjectedHost reads a /clusters whose host outlier detection ejected and
// whose EDS status is draining: both show, as istioctl shows them.
func TestOutlierEjectedHost(t *testing.T) {
	c, err := ParseClusters([]byte(`{"cluster_statuses":[{"name":"outbound|9080|v1|reviews.default.svc.cluster.local",
	  "host_statuses":[
	    {"address":{"socket_address":{"address":"10.244.0.5","port_value":9080}},"health_status":{"eds_health_status":"HEALTHY","failed_outlier_check":true}},
	    {"address":{"socket_address":{"address":"10.244.0.4","port_value":9080}},"health_status":{"eds_health_status":"DRAINING"}}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := (Writer{Out: &out}).Endpoints(c, EndpointFilter{}, Short); err != nil {
		t.Fatal(err)
	}
	want := `ENDPOINT            STATUS       OUTLIER CHECK     CLUSTER
10.244.0.4:9080     DRAINING     OK                outbound|9080|v1|reviews.default.svc.cluster.local
10.244.0.5:9080     HEALTHY      FAILED            outbound|9080|v1|reviews.default.svc.cluster.local
`
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  func() error
		want string
	}{
		{"not json", func() error { _, err := ParseConfigDump([]byte("<html>")); return err }, "decode config_dump"},
		{"clusters not json", func() error { _, err := ParseClusters([]byte("nope")); return err }, "decode /clusters?format=json"},
		{"format", func() error { _, err := ParseFormat("wide"); return err }, `-o "wide": want short, json or yaml`},
		{"direction", func() error { return ClusterFilter{Direction: "sideways"}.Validate() }, `--direction "sideways"`},
		{"port", func() error { return ClusterFilter{Port: 70000}.Validate() }, "--port 70000"},
		{"type", func() error { return ListenerFilter{Type: "UDP"}.Validate() }, `--type "UDP"`},
		{"status", func() error { return EndpointFilter{Status: "fine"}.Validate() }, `--status "fine"`},
		{"no routes section", func() error {
			d, err := ParseConfigDump([]byte(`{"configs":[]}`))
			if err != nil {
				return err
			}
			return Writer{Out: &bytes.Buffer{}}.Routes(d, RouteFilter{}, Short)
		}, "config dump has no configuration type type.googleapis.com/envoy.admin.v3.RoutesConfigDump"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testutil.CheckErr(t, tc.name, tc.err(), tc.want)
		})
	}
	// Valid values pass.
	if err := (ListenerFilter{Type: "http+tcp"}).Validate(); err != nil {
		t.Error(err)
	}
	if err := (EndpointFilter{Status: "unhealthy"}).Validate(); err != nil {
		t.Error(err)
	}
}
