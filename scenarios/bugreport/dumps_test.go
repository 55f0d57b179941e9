package bugreport

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const (
	fortioProxy  = "shop/fortio-deploy-5c4f8b6d9-k8m2p"
	httpbinProxy = "shop/httpbin-7d6b9c8f5-x2x9q"
	clusterType  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
)

// TestDumpsKeptBesideTheLab: the report's proxy dumps are read (from the directory and
// from istioctl's archive), kept under a run directory in the report's layout, private
// to root, and read back as they were.
func TestDumpsKeptBesideTheLab(t *testing.T) {
	for _, src := range []string{fixture, archiveOf(t, fixture)} {
		t.Run(filepath.Base(src), func(t *testing.T) {
			r, err := Read(src)
			if err != nil {
				t.Fatal(err)
			}
			if got := sortedMapKeys(r.Dumps); !slices.Equal(got, []string{fortioProxy, httpbinProxy}) {
				t.Fatalf("dumps of %v; want fortio's and httpbin's", got)
			}
			run := t.TempDir()
			if none, err := KeptProxies(run); err != nil || none != nil {
				t.Errorf("KeptProxies of a lab not made from a report: %v, %v; want none", none, err)
			}
			kept, err := r.KeepDumps(run)
			if err != nil {
				t.Fatal(err)
			}
			listed, err := KeptProxies(run)
			if err != nil || !slices.Equal(listed, kept) || len(kept) != 2 {
				t.Errorf("kept %v, listed %v (%v)", kept, listed, err)
			}
			want, err := os.ReadFile(filepath.Join(fixture, "proxies", "shop", "httpbin-7d6b9c8f5-x2x9q", DumpFile))
			if err != nil {
				t.Fatal(err)
			}
			got, err := KeptDump(run, httpbinProxy)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("kept dump of httpbin: %d bytes (%v); want the report's %d", len(got), err, len(want))
			}
			st, err := os.Stat(filepath.Join(run, KeptDir, "proxies", "shop", "httpbin-7d6b9c8f5-x2x9q", DumpFile))
			if err != nil || st.Mode().Perm() != 0o600 {
				t.Errorf("kept dump's mode: %v (%v); want 0600", st.Mode(), err)
			}
		})
	}
}

// TestDumpWithAStrangeNameIsNotKept: a proxy directory whose names are not Kubernetes
// names never becomes a directory of the lab's; a note says so.
func TestDumpWithAStrangeNameIsNotKept(t *testing.T) {
	dir := copyFixture(t, func(dir string) {
		bad := filepath.Join(dir, "proxies", "Shop_X", "pod")
		if err := os.MkdirAll(bad, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bad, DumpFile), []byte(`{"configs":[]}`), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	r, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Dumps["Shop_X/pod"]; ok || len(r.Dumps) != 2 {
		t.Errorf("dumps %v; want fortio's and httpbin's only", sortedMapKeys(r.Dumps))
	}
	if notes := strings.Join(r.Notes, "\n"); !strings.Contains(notes, "proxies/Shop_X/pod/"+DumpFile+": not a Kubernetes namespace/pod name") {
		t.Errorf("notes do not name the dump left out:\n%s", notes)
	}
}

func TestMatchProxy(t *testing.T) {
	kept := []string{fortioProxy, httpbinProxy, "shop/ratings-0", "other/httpbin-7d6b9c8f5-aaaaa"}
	for _, c := range []struct {
		ns, name, workload, want string
	}{
		{"shop", "httpbin-7d6b9c8f5-x2x9q", "httpbin", httpbinProxy},  // the same pod
		{"shop", "httpbin-59754c85cf-7c855", "httpbin", httpbinProxy}, // the lab's pod of the same Deployment
		{"shop", "fortio-deploy-79bf5d96cf-dfd5f", "fortio-deploy", fortioProxy},
		{"shop", "ratings-0", "ratings", "shop/ratings-0"},                 // a StatefulSet's pod
		{"other", "httpbin-1", "httpbin", "other/httpbin-7d6b9c8f5-aaaaa"}, // by namespace
		{"shop", "fortio-1", "fortio", ""},                                 // fortio-deploy-… is another workload's
		{"default", "httpbin-1", "httpbin", ""},
	} {
		got, err := MatchProxy(kept, c.ns, c.name, c.workload)
		if got != c.want || (c.want == "") != (err != nil) {
			t.Errorf("MatchProxy(%s/%s of %s) = %q, %v; want %q", c.ns, c.name, c.workload, got, err, c.want)
		}
		if err != nil && !strings.Contains(err.Error(), httpbinProxy) {
			t.Errorf("error %q does not list what is kept", err)
		}
	}
	if _, err := MatchProxy(nil, "shop", "x", "x"); err == nil || !strings.Contains(err.Error(), "up --from-bug-report") {
		t.Errorf("no dumps kept: %v; want it to say how a lab keeps them", err)
	}
}

// TestDumpResources: a config dump is read as the resources its control plane sent:
// dynamic listeners, routes, clusters and endpoints by name; no bootstrap's static
// cluster, no secret, no listener without an active state.
func TestDumpResources(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(fixture, "proxies", "shop", "fortio-deploy-5c4f8b6d9-k8m2p", DumpFile))
	if err != nil {
		t.Fatal(err)
	}
	res, err := DumpResources(data)
	if err != nil {
		t.Fatal(err)
	}
	cb, ok := res[clusterType]["outbound|8000||httpbin.shop.svc.cluster.local"].(map[string]any)
	if !ok {
		t.Fatalf("no httpbin cluster among %v", sortedMapKeys(res[clusterType]))
	}
	if _, typed := cb["@type"]; typed {
		t.Error("a resource kept its @type")
	}
	th := cb["circuit_breakers"].(map[string]any)["thresholds"].([]any)[0].(map[string]any)
	if th["max_connections"] != 1.0 || th["max_pending_requests"] != 1.0 {
		t.Errorf("httpbin's circuit breaker %v; want the report's one connection and one pending request", th)
	}
	for typ, name := range map[string]string{
		"type.googleapis.com/envoy.config.listener.v3.Listener":              "virtualOutbound",
		"type.googleapis.com/envoy.config.route.v3.RouteConfiguration":       "8000",
		"type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment": "outbound|8000||httpbin.shop.svc.cluster.local",
	} {
		if _, ok := res[typ][name]; !ok {
			t.Errorf("%s: no %s among %v", typ, name, sortedMapKeys(res[typ]))
		}
	}
	if len(res) != 4 {
		t.Errorf("types %v; want listeners, routes, clusters and endpoints only", sortedMapKeys(res))
	}

	warming := `{"configs":[{"@type":"type.googleapis.com/envoy.admin.v3.ListenersConfigDump","dynamic_listeners":[
		{"name":"a","warming_state":{"listener":{"name":"a"}}},
		{"name":"b","active_state":{"listener":{"@type":"type.googleapis.com/envoy.config.listener.v3.Listener","name":"b"}}}]},
		{"@type":"type.googleapis.com/envoy.admin.v3.SecretsConfigDump","dynamic_active_secrets":[{"name":"default"}]},
		{"@type":"type.googleapis.com/envoy.admin.v3.ClustersConfigDump","static_clusters":[{"cluster":{"name":"prometheus_stats"}}]}]}`
	res, err = DumpResources([]byte(warming))
	if err != nil {
		t.Fatal(err)
	}
	if got := sortedMapKeys(res["type.googleapis.com/envoy.config.listener.v3.Listener"]); !slices.Equal(got, []string{"b"}) {
		t.Errorf("listeners %v; want the active b only", got)
	}
	if len(res[clusterType]) != 0 {
		t.Errorf("clusters %v; want no static one", sortedMapKeys(res[clusterType]))
	}
	if _, err := DumpResources([]byte("not json")); err == nil {
		t.Error("a dump that is not JSON was read")
	}
}
