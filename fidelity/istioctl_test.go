package fidelity

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/dataplane/proxyconfig"

	sdscompare "istio.io/istio/istioctl/pkg/writer/compare/sds"
	istioclusters "istio.io/istio/istioctl/pkg/writer/envoy/clusters"
	"istio.io/istio/istioctl/pkg/writer/envoy/configdump"
	"istio.io/istio/pilot/pkg/model"
	"istio.io/istio/pkg/config/host"
)

// pcView is one `proxy-config` invocation, printed by meshlab's tables and by istioctl's
// own writers (the code behind `istioctl proxy-config`) from the same bytes.
type pcView struct {
	name     string
	meshlab  func(w proxyconfig.Writer, d *proxyconfig.ConfigDump, c *proxyconfig.Clusters) error
	istioctl func(cw *configdump.ConfigWriter, ew *istioclusters.ConfigWriter) error
	// endpoints marks a view of /clusters?format=json rather than of /config_dump.
	endpoints bool
	// json compares the outputs as JSON values rather than as text.
	json bool
}

var pcViews = []pcView{
	{name: "clusters",
		meshlab: func(w proxyconfig.Writer, d *proxyconfig.ConfigDump, _ *proxyconfig.Clusters) error {
			return w.Clusters(d, proxyconfig.ClusterFilter{}, proxyconfig.Short)
		},
		istioctl: func(cw *configdump.ConfigWriter, _ *istioclusters.ConfigWriter) error {
			return cw.PrintClusterSummary(configdump.ClusterFilter{})
		}},
	{name: "clusters --port 9080 --direction outbound",
		meshlab: func(w proxyconfig.Writer, d *proxyconfig.ConfigDump, _ *proxyconfig.Clusters) error {
			return w.Clusters(d, proxyconfig.ClusterFilter{Port: 9080, Direction: proxyconfig.Outbound}, proxyconfig.Short)
		},
		istioctl: func(cw *configdump.ConfigWriter, _ *istioclusters.ConfigWriter) error {
			return cw.PrintClusterSummary(configdump.ClusterFilter{Port: 9080, Direction: model.TrafficDirectionOutbound})
		}},
	{name: "clusters --fqdn reviews --subset v2",
		meshlab: func(w proxyconfig.Writer, d *proxyconfig.ConfigDump, _ *proxyconfig.Clusters) error {
			return w.Clusters(d, proxyconfig.ClusterFilter{FQDN: "reviews", Subset: "v2"}, proxyconfig.Short)
		},
		istioctl: func(cw *configdump.ConfigWriter, _ *istioclusters.ConfigWriter) error {
			return cw.PrintClusterSummary(configdump.ClusterFilter{FQDN: host.Name("reviews"), Subset: "v2"})
		}},
	{name: "listeners",
		meshlab: func(w proxyconfig.Writer, d *proxyconfig.ConfigDump, _ *proxyconfig.Clusters) error {
			return w.Listeners(d, proxyconfig.ListenerFilter{Verbose: true}, proxyconfig.Short)
		},
		istioctl: func(cw *configdump.ConfigWriter, _ *istioclusters.ConfigWriter) error {
			return cw.PrintListenerSummary(configdump.ListenerFilter{Verbose: true})
		}},
	{name: "listeners --verbose=false",
		meshlab: func(w proxyconfig.Writer, d *proxyconfig.ConfigDump, _ *proxyconfig.Clusters) error {
			return w.Listeners(d, proxyconfig.ListenerFilter{}, proxyconfig.Short)
		},
		istioctl: func(cw *configdump.ConfigWriter, _ *istioclusters.ConfigWriter) error {
			return cw.PrintListenerSummary(configdump.ListenerFilter{})
		}},
	{name: "listeners --port 15006 --type http --address 0.0.0.0",
		meshlab: func(w proxyconfig.Writer, d *proxyconfig.ConfigDump, _ *proxyconfig.Clusters) error {
			return w.Listeners(d, proxyconfig.ListenerFilter{Port: 15006, Type: "http", Address: "0.0.0.0", Verbose: true}, proxyconfig.Short)
		},
		istioctl: func(cw *configdump.ConfigWriter, _ *istioclusters.ConfigWriter) error {
			return cw.PrintListenerSummary(configdump.ListenerFilter{Port: 15006, Type: "http", Address: "0.0.0.0", Verbose: true})
		}},
	{name: "routes",
		meshlab: func(w proxyconfig.Writer, d *proxyconfig.ConfigDump, _ *proxyconfig.Clusters) error {
			return w.Routes(d, proxyconfig.RouteFilter{Verbose: true}, proxyconfig.Short)
		},
		istioctl: func(cw *configdump.ConfigWriter, _ *istioclusters.ConfigWriter) error {
			return cw.PrintRouteSummary(configdump.RouteFilter{Verbose: true})
		}},
	{name: "routes --verbose=false",
		meshlab: func(w proxyconfig.Writer, d *proxyconfig.ConfigDump, _ *proxyconfig.Clusters) error {
			return w.Routes(d, proxyconfig.RouteFilter{}, proxyconfig.Short)
		},
		istioctl: func(cw *configdump.ConfigWriter, _ *istioclusters.ConfigWriter) error {
			return cw.PrintRouteSummary(configdump.RouteFilter{})
		}},
	{name: "routes --name 9080",
		meshlab: func(w proxyconfig.Writer, d *proxyconfig.ConfigDump, _ *proxyconfig.Clusters) error {
			return w.Routes(d, proxyconfig.RouteFilter{Name: "9080", Verbose: true}, proxyconfig.Short)
		},
		istioctl: func(cw *configdump.ConfigWriter, _ *istioclusters.ConfigWriter) error {
			return cw.PrintRouteSummary(configdump.RouteFilter{Name: "9080", Verbose: true})
		}},
	{name: "endpoints", endpoints: true,
		meshlab: func(w proxyconfig.Writer, _ *proxyconfig.ConfigDump, c *proxyconfig.Clusters) error {
			return w.Endpoints(c, proxyconfig.EndpointFilter{}, proxyconfig.Short)
		},
		istioctl: func(_ *configdump.ConfigWriter, ew *istioclusters.ConfigWriter) error {
			return ew.PrintEndpointsSummary(istioclusters.EndpointFilter{})
		}},
	{name: "endpoints --status healthy --port 9080", endpoints: true,
		meshlab: func(w proxyconfig.Writer, _ *proxyconfig.ConfigDump, c *proxyconfig.Clusters) error {
			return w.Endpoints(c, proxyconfig.EndpointFilter{Status: "healthy", Port: 9080}, proxyconfig.Short)
		},
		istioctl: func(_ *configdump.ConfigWriter, ew *istioclusters.ConfigWriter) error {
			return ew.PrintEndpointsSummary(istioclusters.EndpointFilter{Status: "healthy", Port: 9080})
		}},
	{name: "secrets",
		meshlab: func(w proxyconfig.Writer, d *proxyconfig.ConfigDump, _ *proxyconfig.Clusters) error {
			return w.Secrets(d, proxyconfig.Short)
		},
		istioctl: func(cw *configdump.ConfigWriter, _ *istioclusters.ConfigWriter) error {
			return cw.PrintSecretSummary()
		}},
	{name: "bootstrap -o short",
		meshlab: func(w proxyconfig.Writer, d *proxyconfig.ConfigDump, _ *proxyconfig.Clusters) error {
			return w.Bootstrap(d, proxyconfig.Short)
		},
		istioctl: func(cw *configdump.ConfigWriter, _ *istioclusters.ConfigWriter) error {
			return cw.PrintBootstrapSummary()
		}},
	{name: "all --with-headers --port 9080",
		meshlab: func(w proxyconfig.Writer, d *proxyconfig.ConfigDump, _ *proxyconfig.Clusters) error {
			return w.All(d, proxyconfig.AllFilter{
				Cluster:  proxyconfig.ClusterFilter{Port: 9080},
				Listener: proxyconfig.ListenerFilter{Port: 9080, Verbose: true},
				Route:    proxyconfig.RouteFilter{Verbose: true},
				Endpoint: proxyconfig.EndpointFilter{Port: 9080}, WithHeaders: true,
			}, proxyconfig.Short)
		},
		istioctl: func(cw *configdump.ConfigWriter, _ *istioclusters.ConfigWriter) error {
			// istioctl's `all` switches both writers to their typed names, process-wide.
			configdump.SetPrintConfigTypeInSummary(true)
			sdscompare.SetPrintConfigTypeInSummary(true)
			defer configdump.SetPrintConfigTypeInSummary(false)
			defer sdscompare.SetPrintConfigTypeInSummary(false)
			return cw.PrintFullSummary(configdump.ClusterFilter{Port: 9080},
				configdump.ListenerFilter{Port: 9080, Verbose: true},
				configdump.RouteFilter{Verbose: true},
				configdump.EndpointFilter{Port: 9080}, true)
		}},
	{name: "clusters -o json --port 9080", json: true,
		meshlab: func(w proxyconfig.Writer, d *proxyconfig.ConfigDump, _ *proxyconfig.Clusters) error {
			return w.Clusters(d, proxyconfig.ClusterFilter{Port: 9080}, proxyconfig.JSON)
		},
		istioctl: func(cw *configdump.ConfigWriter, _ *istioclusters.ConfigWriter) error {
			return cw.PrintClusterDump(configdump.ClusterFilter{Port: 9080}, "json")
		}},
	{name: "routes -o json --name 9080", json: true,
		meshlab: func(w proxyconfig.Writer, d *proxyconfig.ConfigDump, _ *proxyconfig.Clusters) error {
			return w.Routes(d, proxyconfig.RouteFilter{Name: "9080"}, proxyconfig.JSON)
		},
		istioctl: func(cw *configdump.ConfigWriter, _ *istioclusters.ConfigWriter) error {
			return cw.PrintRouteDump(configdump.RouteFilter{Name: "9080"}, "json")
		}},
	{name: "endpoints -o json --port 9080", json: true, endpoints: true,
		meshlab: func(w proxyconfig.Writer, _ *proxyconfig.ConfigDump, c *proxyconfig.Clusters) error {
			return w.Endpoints(c, proxyconfig.EndpointFilter{Port: 9080}, proxyconfig.JSON)
		},
		istioctl: func(_ *configdump.ConfigWriter, ew *istioclusters.ConfigWriter) error {
			return ew.PrintEndpoints(istioclusters.EndpointFilter{Port: 9080}, "json")
		}},
}

// pcDump is one proxy's admin output: its /config_dump and, when there is one, its
// /clusters?format=json.
type pcDump struct {
	name                 string
	configDump, clusters string // file paths
}

// pcDumps are the dumps meshlab's own tables are golden-tested on (the hello and
// bookinfo labs' sidecars, captured from running labs), and real Envoy's dumps that
// istioctl's writers are tested on in Istio's tree.
func pcDumps(t *testing.T) []pcDump {
	t.Helper()
	var out []pcDump
	labDumps, err := filepath.Glob(filepath.Join("..", "dataplane", "proxyconfig", "testdata", "dumps", "*.config_dump.json"))
	if err != nil || len(labDumps) < 3 {
		t.Fatalf("find the labs' dumps: %v (%d found)", err, len(labDumps))
	}
	for _, f := range labDumps {
		name := strings.TrimSuffix(filepath.Base(f), ".config_dump.json")
		out = append(out, pcDump{name: name, configDump: f, clusters: strings.TrimSuffix(f, ".config_dump.json") + ".clusters.json"})
	}
	cmd := exec.CommandContext(t.Context(), "go", "list", "-f", "{{.Dir}}", "istio.io/istio/istioctl/pkg/writer/envoy/configdump")
	dir, err := cmd.Output()
	if err != nil {
		t.Fatalf("locate istioctl's configdump writer: %v", err)
	}
	td := filepath.Join(strings.TrimSpace(string(dir)), "testdata")
	for _, rel := range []string{"configdump.json", "endpoint/configdump.json", "secret/istio/config_dump.json", "secret/spire/config_dump.json",
		"routes/istio-gateway-http-route-prefix/configdump.json", "routes/k8s-gateway-http-route-path-prefix/configdump.json", "routes/empty-gateway/configdump.json"} {
		out = append(out, pcDump{name: "istio/" + rel, configDump: filepath.Join(td, rel)})
	}
	return out
}

// TestProxyConfigMatchesIstioctl prints every view of every dump with meshlab's
// dataplane/proxyconfig and with istioctl's writers, and requires the same text (the
// same columns, rows, order and spacing), or the same JSON value, or both failing.
func TestProxyConfigMatchesIstioctl(t *testing.T) {
	compared := 0
	for _, dump := range pcDumps(t) {
		cdBytes, err := os.ReadFile(dump.configDump)
		if err != nil {
			t.Fatal(err)
		}
		var clBytes []byte
		if dump.clusters != "" {
			if clBytes, err = os.ReadFile(dump.clusters); err != nil {
				t.Fatal(err)
			}
		}
		for _, v := range pcViews {
			if v.endpoints && clBytes == nil {
				continue
			}
			t.Run(dump.name+"/"+v.name, func(t *testing.T) {
				var theirs, ours bytes.Buffer
				cw := &configdump.ConfigWriter{Stdout: &theirs}
				ew := &istioclusters.ConfigWriter{Stdout: &theirs}
				if err := cw.Prime(cdBytes); err != nil {
					t.Fatalf("istioctl: %v", err)
				}
				if clBytes != nil {
					if err := ew.Prime(clBytes); err != nil {
						t.Fatalf("istioctl: %v", err)
					}
				}
				theirErr := v.istioctl(cw, ew)

				d, err := proxyconfig.ParseConfigDump(cdBytes)
				if err != nil {
					t.Fatalf("meshlab: %v", err)
				}
				var c *proxyconfig.Clusters
				if clBytes != nil {
					if c, err = proxyconfig.ParseClusters(clBytes); err != nil {
						t.Fatalf("meshlab: %v", err)
					}
				}
				ourErr := v.meshlab(proxyconfig.Writer{Out: &ours}, d, c)

				if (theirErr == nil) != (ourErr == nil) {
					t.Fatalf("istioctl: %v; meshlab: %v\nistioctl printed:\n%s\nmeshlab printed:\n%s", theirErr, ourErr, theirs.String(), ours.String())
				}
				if theirErr != nil {
					return // both refuse the dump (a dump without this section)
				}
				if v.json {
					var a, b any
					if err := json.Unmarshal(theirs.Bytes(), &a); err != nil {
						t.Fatalf("istioctl's JSON: %v", err)
					}
					if err := json.Unmarshal(ours.Bytes(), &b); err != nil {
						t.Fatalf("meshlab's JSON: %v", err)
					}
					if !reflect.DeepEqual(a, b) {
						t.Errorf("JSON differs\nistioctl:\n%s\nmeshlab:\n%s", theirs.String(), ours.String())
					}
					return
				}
				if theirs.String() != ours.String() {
					t.Errorf("tables differ\nistioctl:\n%s\nmeshlab:\n%s\n%s", theirs.String(), ours.String(), lineDiff(theirs.String(), ours.String()))
				}
				if theirs.Len() == 0 {
					t.Error("istioctl printed nothing: the view compares nothing")
				}
			})
			compared++
		}
	}
	if compared < 50 {
		t.Errorf("compared %d views; the dumps or views went missing", compared)
	}
}

// lineDiff names the first line where two outputs part.
func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return "first difference at line " + strconv.Itoa(i+1) + ":\n  istioctl: " + x + "\n  meshlab:  " + y
		}
	}
	return ""
}
