package fidelity

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/dataplane/ztunnelconfig"

	zconfigdump "istio.io/istio/istioctl/pkg/writer/ztunnel/configdump"
)

// zcView is one `ztunnel-config` invocation, printed by meshlab's dataplane/ztunnelconfig
// and by istioctl's own ztunnel writer (the code behind `istioctl ztunnel-config`) from the
// same /config_dump bytes.
type zcView struct {
	name     string
	meshlab  func(w ztunnelconfig.Writer, d *ztunnelconfig.Dump) error
	istioctl func(cw *zconfigdump.ConfigWriter) error
	// ordered marks a view whose order is the dump's own: compared only on dumps in
	// ztunnel's list form (istioctl reads the older map form in map order).
	ordered bool
}

var zcViews = []zcView{
	{name: "workloads",
		meshlab: func(w ztunnelconfig.Writer, d *ztunnelconfig.Dump) error {
			return w.Workloads(d, ztunnelconfig.WorkloadFilter{}, ztunnelconfig.Short)
		},
		istioctl: func(cw *zconfigdump.ConfigWriter) error { return cw.PrintWorkloadSummary(zconfigdump.WorkloadFilter{}) }},
	{name: "workloads --workload-namespace default --workload-node ml-lab-node",
		meshlab: func(w ztunnelconfig.Writer, d *ztunnelconfig.Dump) error {
			return w.Workloads(d, ztunnelconfig.WorkloadFilter{Namespace: "default", Node: "ml-lab-node"}, ztunnelconfig.Short)
		},
		istioctl: func(cw *zconfigdump.ConfigWriter) error {
			return cw.PrintWorkloadSummary(zconfigdump.WorkloadFilter{Namespace: "default", Node: "ml-lab-node"})
		}},
	{name: "workloads --address 10.10.0.12 -o json", ordered: true,
		meshlab: func(w ztunnelconfig.Writer, d *ztunnelconfig.Dump) error {
			return w.Workloads(d, ztunnelconfig.WorkloadFilter{Address: "10.10.0.12"}, ztunnelconfig.JSON)
		},
		istioctl: func(cw *zconfigdump.ConfigWriter) error {
			return cw.PrintWorkloadDump(zconfigdump.WorkloadFilter{Address: "10.10.0.12"}, "json")
		}},
	{name: "workloads -o yaml", ordered: true,
		meshlab: func(w ztunnelconfig.Writer, d *ztunnelconfig.Dump) error {
			return w.Workloads(d, ztunnelconfig.WorkloadFilter{}, ztunnelconfig.YAML)
		},
		istioctl: func(cw *zconfigdump.ConfigWriter) error {
			return cw.PrintWorkloadDump(zconfigdump.WorkloadFilter{}, "yaml")
		}},
	{name: "services",
		meshlab: func(w ztunnelconfig.Writer, d *ztunnelconfig.Dump) error {
			return w.Services(d, ztunnelconfig.NamespaceFilter{}, ztunnelconfig.Short)
		},
		istioctl: func(cw *zconfigdump.ConfigWriter) error { return cw.PrintServiceSummary(zconfigdump.ServiceFilter{}) }},
	{name: "services --service-namespace default -o json",
		meshlab: func(w ztunnelconfig.Writer, d *ztunnelconfig.Dump) error {
			return w.Services(d, ztunnelconfig.NamespaceFilter{Namespace: "default"}, ztunnelconfig.JSON)
		},
		istioctl: func(cw *zconfigdump.ConfigWriter) error {
			return cw.PrintServiceDump(zconfigdump.ServiceFilter{Namespace: "default"}, "json")
		}},
	{name: "policies",
		meshlab: func(w ztunnelconfig.Writer, d *ztunnelconfig.Dump) error {
			return w.Policies(d, ztunnelconfig.NamespaceFilter{}, ztunnelconfig.Short)
		},
		istioctl: func(cw *zconfigdump.ConfigWriter) error { return cw.PrintPolicySummary(zconfigdump.PolicyFilter{}) }},
	{name: "policies -o yaml",
		meshlab: func(w ztunnelconfig.Writer, d *ztunnelconfig.Dump) error {
			return w.Policies(d, ztunnelconfig.NamespaceFilter{}, ztunnelconfig.YAML)
		},
		istioctl: func(cw *zconfigdump.ConfigWriter) error {
			return cw.PrintPolicyDump(zconfigdump.PolicyFilter{}, "yaml")
		}},
	{name: "certificates", ordered: true,
		meshlab: func(w ztunnelconfig.Writer, d *ztunnelconfig.Dump) error {
			return w.Certificates(d, ztunnelconfig.Short)
		},
		istioctl: func(cw *zconfigdump.ConfigWriter) error { return cw.PrintSecretSummary() }},
	{name: "certificates -o json", ordered: true,
		meshlab: func(w ztunnelconfig.Writer, d *ztunnelconfig.Dump) error {
			return w.Certificates(d, ztunnelconfig.JSON)
		},
		istioctl: func(cw *zconfigdump.ConfigWriter) error { return cw.PrintSecretDump("json") }},
	{name: "connections",
		meshlab: func(w ztunnelconfig.Writer, d *ztunnelconfig.Dump) error {
			return w.Connections(d, ztunnelconfig.ConnectionsFilter{}, ztunnelconfig.Short)
		},
		istioctl: func(cw *zconfigdump.ConfigWriter) error {
			return cw.PrintConnectionsSummary(zconfigdump.ConnectionsFilter{})
		}},
	{name: "connections --raw --direction outbound",
		meshlab: func(w ztunnelconfig.Writer, d *ztunnelconfig.Dump) error {
			return w.Connections(d, ztunnelconfig.ConnectionsFilter{Raw: true, Direction: "outbound"}, ztunnelconfig.Short)
		},
		istioctl: func(cw *zconfigdump.ConfigWriter) error {
			return cw.PrintConnectionsSummary(zconfigdump.ConnectionsFilter{Raw: true, Direction: "outbound"})
		}},
	{name: "connections productpage-v1-0.default -o json",
		meshlab: func(w ztunnelconfig.Writer, d *ztunnelconfig.Dump) error {
			return w.Connections(d, ztunnelconfig.ConnectionsFilter{Workload: "productpage-v1-0.default"}, ztunnelconfig.JSON)
		},
		istioctl: func(cw *zconfigdump.ConfigWriter) error {
			return cw.PrintConnectionsDump(zconfigdump.ConnectionsFilter{Workload: "productpage-v1-0.default"}, "json")
		}},
	{name: "all --with-headers", ordered: true,
		meshlab:  func(w ztunnelconfig.Writer, d *ztunnelconfig.Dump) error { return w.All(d, true, ztunnelconfig.Short) },
		istioctl: func(cw *zconfigdump.ConfigWriter) error { return cw.PrintFullSummary(true) }},
	{name: "all -o yaml", ordered: true,
		meshlab:  func(w ztunnelconfig.Writer, d *ztunnelconfig.Dump) error { return w.All(d, false, ztunnelconfig.YAML) },
		istioctl: func(cw *zconfigdump.ConfigWriter) error { return cw.PrintFullDump("yaml") }},
}

type zcDump struct {
	name string
	path string
	// maps marks a dump in the older map form.
	maps bool
}

// zcDumps are meshlab's ztunnel admin's golden /config_dump and istioctl's own test dump.
func zcDumps(t *testing.T) []zcDump {
	t.Helper()
	out := []zcDump{{name: "meshlab-admin", path: filepath.Join("..", "dataplane", "ztunnel", "admin", "testdata", "config_dump.golden")}}
	cmd := exec.CommandContext(t.Context(), "go", "list", "-f", "{{.Dir}}", "istio.io/istio/istioctl/pkg/writer/ztunnel/configdump")
	dir, err := cmd.Output()
	if err != nil {
		t.Fatalf("locate istioctl's ztunnel writer: %v", err)
	}
	out = append(out, zcDump{name: "istio/dump.json", path: filepath.Join(strings.TrimSpace(string(dir)), "testdata", "dump.json"), maps: true})
	return out
}

// TestZtunnelConfigMatchesIstioctl prints every view of every dump with meshlab's
// dataplane/ztunnelconfig and with istioctl's ztunnel writer, and requires the same text:
// the same columns, rows, order, spacing and documents. The certificates' VALID CERT
// column reads the clock in both, at the same moment.
func TestZtunnelConfigMatchesIstioctl(t *testing.T) {
	compared := 0
	for _, dump := range zcDumps(t) {
		b, err := os.ReadFile(dump.path)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range zcViews {
			if v.ordered && dump.maps {
				continue
			}
			t.Run(dump.name+"/"+v.name, func(t *testing.T) {
				var theirs, ours bytes.Buffer
				cw := &zconfigdump.ConfigWriter{Stdout: &theirs, FullDump: b}
				if err := cw.Prime(b); err != nil {
					t.Fatalf("istioctl: %v", err)
				}
				theirErr := v.istioctl(cw)
				d, err := ztunnelconfig.Parse(b)
				if err != nil {
					t.Fatalf("meshlab: %v", err)
				}
				ourErr := v.meshlab(ztunnelconfig.Writer{Out: &ours}, d)
				if (theirErr == nil) != (ourErr == nil) {
					t.Fatalf("istioctl: %v; meshlab: %v", theirErr, ourErr)
				}
				if theirs.String() != ours.String() {
					t.Errorf("istioctl printed:\n%s\nmeshlab printed:\n%s", theirs.String(), ours.String())
				}
				compared++
			})
		}
	}
	if compared < 20 {
		t.Errorf("compared %d views, want at least 20", compared)
	}
}
