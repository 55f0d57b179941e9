package agent

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"

	"github.com/spf13/pflag"
)

func parseArgs(t *testing.T, args []string) (Config, error) {
	t.Helper()
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	build := BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	c, err := build()
	if err != nil {
		return Config{}, err
	}
	c.ProxyType, err = ParseProxyArgs(fs.Args())
	return c, err
}

func TestArgsRoundTrip(t *testing.T) {
	full := fixedPod()
	full.ProxyPath = "/usr/local/bin/envoy"
	full.MeshlabPath = "/usr/local/bin/meshlab"
	full.BaseID = 42
	full.Labels["weird"] = "a=b,c"
	full.TerminationDrainDuration = 1500 * time.Millisecond
	full.DataPlane = agentapi.DataPlaneChoiceEnvoy
	full.BootstrapOverride = `{"stats_flush_interval": "7s"}`
	full.AppMetricsPort, full.AppMetricsPath = 9090, "/custom/metrics"
	full.ZipkinAddress, full.HostIP = "$(HOST_IP):9411", "10.244.0.1"
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{name: "full", cfg: full},
		{name: "proxyless", cfg: Config{Pod: "p", Proxyless: true, AppUID: 1879113729, TokenPath: "/t"}},
		{name: "zero", cfg: Config{}},
		{name: "proxy waypoint", cfg: Config{Pod: "w", ProxyType: ProxyTypeWaypoint}},
		{name: "required only", cfg: Config{Lab: "l", Pod: "p", Namespace: "ns", PodIP: full.PodIP, NodeID: "n",
			ServiceCluster: "c", ServiceAccount: "sa", RunDir: "/r", XDSSocket: "/x", LabSocket: "/a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseArgs(t, Args(tc.cfg))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.cfg) {
				t.Errorf("round trip:\n got %+v\nwant %+v\nargs %q", got, tc.cfg, Args(tc.cfg))
			}
		})
	}
}

func TestArgsAreStable(t *testing.T) {
	c := Config{Pod: "p", Labels: map[string]string{"b": "2", "a": "1"}, AdminPort: 15000, DrainDuration: 45 * time.Second}
	want := "--pod=p --label=a=1 --label=b=2 --drain-duration=45s --termination-drain-duration=0s --admin-port=15000"
	if got := strings.Join(Args(c), " "); got != want {
		t.Errorf("Args = %s, want %s", got, want)
	}
}

func TestBindFlagsRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{name: "pod ip", args: []string{"--pod-ip=10.0.0"}},
		{name: "label without =", args: []string{"--label=app"}},
		{name: "label with empty key", args: []string{"--label==x"}},
		{name: "port out of range", args: []string{"--admin-port=70000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parseArgs(t, tc.args); err == nil {
				t.Errorf("%q accepted", tc.args)
			}
		})
	}
}

func TestValidateNamesEveryMissingField(t *testing.T) {
	err := Config{}.withDefaults().validate()
	if err == nil {
		t.Fatal("empty config accepted")
	}
	for _, want := range []string{"lab", "pod is", "namespace", "pod ip", "node id", "service cluster",
		"service account", "run dir", "xds socket", "lab socket"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if err := fixedPod().validate(); err != nil {
		t.Errorf("valid config rejected: %v", err)
	}
}

func FuzzParseLabel(f *testing.F) {
	for _, s := range []string{"app=backend", "a=", "=b", "noequals", "k=v=w", "", "a=b,c=d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, v, err := parseLabel(s)
		if err != nil {
			if k != "" || v != "" {
				t.Errorf("error with a result: %q %q", k, v)
			}
			return
		}
		if k == "" || strings.Contains(k, "=") || k+"="+v != s {
			t.Errorf("parseLabel(%q) = %q, %q", s, k, v)
		}
		// What parses must survive Args and BindFlags.
		c := Config{Labels: map[string]string{k: v}}
		got, err := parseArgs(t, Args(c))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Labels, c.Labels) {
			t.Errorf("labels round trip: got %q, want %q", got.Labels, c.Labels)
		}
	})
}
