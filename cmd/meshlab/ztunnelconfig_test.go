package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/dataplane/ztunnelconfig"
)

// ztunnelDump is the ztunnel admin's golden /config_dump.
var ztunnelDump = filepath.Join("..", "..", "dataplane", "ztunnel", "admin", "testdata", "config_dump.golden")

func TestZtunnelConfigTypesTakeIstioctlsNames(t *testing.T) {
	b, err := os.ReadFile(ztunnelDump)
	if err != nil {
		t.Fatal(err)
	}
	d, err := ztunnelconfig.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := (ztunnelconfig.Writer{Out: &want}).Workloads(d, ztunnelconfig.WorkloadFilter{Namespace: "default"}, ztunnelconfig.Short); err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"ztunnel-config", "zc"} {
		for _, spelling := range []string{"workload", "workloads", "w"} {
			got, err := run(t, verb, spelling, "-f", ztunnelDump, "--workload-namespace", "default")
			if err != nil || got != want.String() {
				t.Errorf("%s %s = %v\n%s\nwant\n%s", verb, spelling, err, got, want.String())
			}
		}
	}
	for _, spelling := range []string{"service", "services", "s", "svc", "policy", "policies", "p", "pol", "certificate", "certificates", "certs", "cert", "connections", "cons", "all"} {
		if _, err := run(t, "zc", spelling, "-f", ztunnelDump); err != nil {
			t.Errorf("zc %s: %v", spelling, err)
		}
	}
	// A workload pod as argument shows only its own rows.
	got, err := run(t, "zc", "connections", "productpage-v1-0.default", "-f", ztunnelDump, "--direction", "outbound", "--raw")
	if err != nil || !strings.Contains(got, "10.10.0.12:15008") || strings.Contains(got, "Inbound") {
		t.Errorf("zc connections productpage-v1-0.default = %v\n%s", err, got)
	}
	got, err = run(t, "zc", "workloads", "curl-0.legacy", "-f", ztunnelDump, "-o", "json")
	if err != nil || !strings.Contains(got, `"name": "curl-0"`) || strings.Contains(got, "reviews") {
		t.Errorf("zc workloads curl-0.legacy -o json = %v\n%s", err, got)
	}
	for _, bad := range [][]string{
		{"zc"}, {"zc", "bogus"}, {"zc", "workloads", "-o", "wide", "-f", ztunnelDump},
		{"zc", "connections", "--direction", "sideways", "-f", ztunnelDump},
		{"zc", "workloads", "-f", filepath.Join(t.TempDir(), "missing.json")},
	} {
		if _, err := run(t, bad...); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}
