package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/dataplane/proxyconfig"
	"github.com/meshlab/meshlab/internal/testutil"
)

// dumpFile is a real lab's sidecar dump, as dataplane/proxyconfig's golden tests use.
func dumpFile(name, kind string) string {
	return filepath.Join("..", "..", "dataplane", "proxyconfig", "testdata", "dumps", name+"."+kind+".json")
}

// run runs the CLI with a run root of its own, so no real lab is seen.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return runRoot(t, append([]string{"--run-root", t.TempDir()}, args...)...)
}

func TestProxyConfigTypesTakeIstioctlsNames(t *testing.T) {
	dump := dumpFile("bookinfo-productpage-v1", "config_dump")
	var want bytes.Buffer
	d := mustParseDump(t, dump)
	if err := (proxyconfig.Writer{Out: &want}).Clusters(d, proxyconfig.ClusterFilter{FQDN: "reviews", Direction: proxyconfig.Outbound}, proxyconfig.Short); err != nil {
		t.Fatal(err)
	}
	for _, spelling := range []string{"cluster", "clusters", "c"} {
		for _, verb := range []string{"proxy-config", "pc"} {
			got, err := run(t, verb, spelling, "-f", dump, "--fqdn", "reviews", "--direction", "outbound")
			if err != nil {
				t.Fatalf("%s %s: %v", verb, spelling, err)
			}
			if got != want.String() {
				t.Errorf("%s %s printed\n%s\nwant\n%s", verb, spelling, got, want.String())
			}
		}
	}
	for _, spelling := range []string{"listener", "listeners", "l", "route", "routes", "r", "secret", "secrets", "s", "all", "a", "bootstrap", "b"} {
		if _, err := run(t, "proxy-config", spelling, "-f", dump); err != nil {
			t.Errorf("proxy-config %s: %v", spelling, err)
		}
	}
	for _, spelling := range []string{"endpoint", "endpoints", "ep"} {
		got, err := run(t, "proxy-config", spelling, "-f", dumpFile("bookinfo-productpage-v1", "clusters"), "--status", "healthy")
		if err != nil || !strings.Contains(got, "OUTLIER CHECK") {
			t.Errorf("proxy-config %s: %v\n%s", spelling, err, got)
		}
	}
}

// TestProxyConfigNameFiltersRoutes: in proxy-config routes (and all), --name is
// istioctl's route filter, never a lab (istioctl users type `proxy-config routes POD
// --name 9080`).
func TestProxyConfigNameFiltersRoutes(t *testing.T) {
	dump := dumpFile("bookinfo-productpage-v1", "config_dump")
	got, err := run(t, "proxy-config", "routes", "-f", dump, "--name", "9080")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "NAME") {
		t.Fatalf("routes --name 9080:\n%s", got)
	}
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l, "9080 ") {
			t.Errorf("routes --name 9080 shows another route: %q", l)
		}
	}
	// Where istioctl has no --name, it still names the lab (docs and scripts use it).
	_, err = run(t, "proxy-config", "clusters", "frontend-v1", "--name", "second")
	testutil.CheckErr(t, "clusters --name", err, `"second"`)
	_, err = run(t, "--lab", "first", "proxy-config", "clusters", "frontend-v1", "--name", "second")
	testutil.CheckErr(t, "clusters --lab --name", err, "--lab first and --name second name different labs")
	// A route filter that names no route prints the header only, as istioctl, and says on
	// stderr (here mixed into the output) that the lab is --lab.
	got, err = run(t, "--name", "first", "proxy-config", "routes", "-f", dump)
	if err != nil || !strings.HasPrefix(got, "NAME ") || strings.Count(got, "\n") != 2 ||
		!strings.Contains(got, `meshlab: no route is named "first" (routes: , 9080, InboundPassthroughCluster, inbound|9080||); here --name filters routes, as in istioctl: choose the lab with --lab`) {
		t.Errorf("routes --name first (%v):\n%s", err, got)
	}
}

func TestProxyConfigRefusals(t *testing.T) {
	dump := dumpFile("hello-frontend-v1", "config_dump")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"proxy-config", "clusterz", "frontend-v1"}, `unknown type "clusterz": choose one of all, a, bootstrap, b, cluster, clusters, c`},
		{[]string{"proxy-config", "clusters"}, "cluster takes a pod name or --file, one of them"},
		{[]string{"proxy-config", "clusters", "frontend-v1", "-f", dump}, "cluster takes a pod name or --file, one of them"},
		{[]string{"proxy-config", "clusters", "-f", dump, "-o", "wide"}, `-o "wide": want short, json or yaml`},
		{[]string{"proxy-config", "clusters", "-f", dump, "--direction", "up"}, `--direction "up": want inbound or outbound`},
		{[]string{"proxy-config", "listeners", "-f", dump, "--type", "udp"}, `--type "udp"`},
		{[]string{"proxy-config", "endpoints", "-f", dump, "--status", "sad"}, `--status "sad"`},
		{[]string{"proxy-config", "clusters", "-f", "/nonexistent/dump.json"}, "--file: open /nonexistent/dump.json"},
		{[]string{"proxy-config", "clusters", "-f", "proxyconfig_test.go"}, "proxyconfig_test.go: decode config_dump"},
		{[]string{"proxy-config", "clusters", "frontend-v1"}, "no lab is running"},
	} {
		_, err := run(t, tc.args...)
		testutil.CheckErr(t, strings.Join(tc.args, " "), err, tc.want)
	}
}

func TestProxyConfigOutputFormats(t *testing.T) {
	dump := dumpFile("hello-frontend-v1", "config_dump")
	got, err := run(t, "proxy-config", "clusters", "-f", dump, "--fqdn", "backend", "-o", "yaml")
	if err != nil || !strings.HasPrefix(got, "- ") || !strings.Contains(got, "name: outbound|8080||backend.default.svc.cluster.local") {
		t.Errorf("clusters -o yaml (%v):\n%s", err, got)
	}
	got, err = run(t, "proxy-config", "bootstrap", "-f", dump)
	if err != nil || !strings.HasPrefix(got, "{") || !strings.Contains(got, `"bootstrap"`) {
		t.Errorf("bootstrap defaults to JSON as istioctl's (%v):\n%.300s", err, got)
	}
	got, err = run(t, "proxy-config", "bootstrap", "-f", dump, "-o", "short")
	if err != nil || !strings.Contains(got, "Istio Version:") {
		t.Errorf("bootstrap -o short (%v):\n%s", err, got)
	}
}

func mustParseDump(t *testing.T, path string) *proxyconfig.ConfigDump {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := proxyconfig.ParseConfigDump(b)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
