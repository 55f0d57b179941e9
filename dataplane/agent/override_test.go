package agent

import (
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

func TestProxySettingsValidateDataPlaneAndOverride(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    agentapi.ProxySettings
		want string
	}{
		{name: "envoy", s: agentapi.ProxySettings{DataPlane: "envoy", ProxyPath: "/opt/envoy"}},
		{name: "meshlab", s: agentapi.ProxySettings{DataPlane: "meshlab"}},
		{name: "unknown data plane", s: agentapi.ProxySettings{DataPlane: "nginx"}, want: `data plane "nginx" is not "envoy" or "meshlab"`},
		{name: "meshlab with a path", s: agentapi.ProxySettings{DataPlane: "meshlab", ProxyPath: "/opt/envoy"}, want: `proxy path "/opt/envoy" needs data plane "envoy"`},
		{name: "override", s: agentapi.ProxySettings{BootstrapOverride: `{"stats_flush_interval": "7s"}`}},
		{name: "override unknown field", s: agentapi.ProxySettings{BootstrapOverride: `{"stats_flush": "7s"}`}, want: `parse bootstrap override: `},
		{name: "override not json", s: agentapi.ProxySettings{BootstrapOverride: `admin:`}, want: `parse bootstrap override: `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := validateSettings(tc.s)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("validate = %v, want %q", err, tc.want)
			}
		})
	}
}

// The override is merged with proto.Merge: a set scalar replaces, a message merges field
// by field, a repeated field is appended; the result still validates.
func TestBootstrapOverrideIsMerged(t *testing.T) {
	c := fixedPod()
	c.RunDir = t.TempDir()
	c.BootstrapOverride = `{"stats_flush_interval": "7s", "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 15999}}},
		"static_resources": {"clusters": [{"name": "extra", "type": "STATIC", "connect_timeout": "1s"}]}}`
	path, err := writeBootstrap(c, 0)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if d := got.GetStatsFlushInterval().AsDuration().String(); d != "7s" {
		t.Errorf("stats_flush_interval = %s, want 7s", d)
	}
	if p := got.GetAdmin().GetAddress().GetSocketAddress().GetPortValue(); p != 15999 {
		t.Errorf("admin port = %d, want the override's 15999", p)
	}
	if len(got.GetAdmin().GetAccessLog()) != 1 {
		t.Errorf("admin access log lost in the merge: %v", got.GetAdmin())
	}
	clusters := got.GetStaticResources().GetClusters()
	if n := len(clusters); n != 5 || clusters[0].GetName() != xdsClusterName || clusters[4].GetName() != "extra" {
		t.Errorf("static clusters = %d, want the 4 generated ones then extra", n)
	}

	// A fragment that parses but leaves an invalid bootstrap is refused before any
	// process starts.
	c.BootstrapOverride = `{"static_resources": {"clusters": [{"name": ""}]}}`
	if _, err := writeBootstrap(c, 1); err == nil || !strings.Contains(err.Error(), "validate bootstrap") {
		t.Errorf("writeBootstrap with an invalid merge = %v, want a validation error", err)
	}
}

func TestResolveProxyDataPlaneChoice(t *testing.T) {
	noEnvoy := func(string) (string, error) { return "", errors.New("not found") }
	self := func() (string, error) { return "/bin/meshlab", nil }
	l := lookup{getenv: func(string) string { return "" }, lookPath: noEnvoy, executable: self}
	if _, err := resolveProxy(Config{DataPlane: agentapi.DataPlaneChoiceEnvoy}, l); !errors.Is(err, errNoEnvoy) {
		t.Errorf("envoy chosen, none found: %v, want errNoEnvoy", err)
	}
	withEnvoy := l
	withEnvoy.lookPath = func(string) (string, error) { return "/usr/bin/envoy", nil }
	got, err := resolveProxy(Config{DataPlane: agentapi.DataPlaneChoiceMeshlab}, withEnvoy)
	if err != nil || got.Path != "/bin/meshlab" || got.DataPlane != agentapi.DataPlaneMeshlabProxy {
		t.Errorf("meshlab chosen while envoy is on PATH: %+v %v, want the built-in proxy", got, err)
	}
	got, err = resolveProxy(Config{DataPlane: agentapi.DataPlaneChoiceEnvoy}, withEnvoy)
	if err != nil || got.Path != "/usr/bin/envoy" {
		t.Errorf("envoy chosen and on PATH: %+v %v", got, err)
	}
}

// Faults that end in a failed pod with a clear message at once, while the agent keeps
// serving its status: a proxy binary that is not executable, and a data plane choice of
// envoy where none is installed.
func TestRunUnstartableProxyFailsThePod(t *testing.T) {
	t.Run("not executable", func(t *testing.T) {
		bin := filepath.Join(t.TempDir(), "not-executable")
		if err := os.WriteFile(bin, []byte("not a program"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := startAgentWith(t, "", func(c *Config) { c.ProxyPath = bin; c.MeshlabPath = "" })
		st := waitStatus(t, r, "pod failed", func(s agentapi.Status) bool { return s.Failed })
		if st.Ready || !strings.Contains(st.Message, "proxy cannot be started") || !strings.Contains(st.Message, "permission denied") {
			t.Errorf("status = %+v", st)
		}
		r.stop(t)
	})
	t.Run("bootstrap override breaks the bootstrap", func(t *testing.T) {
		r := startAgentWith(t, "", func(c *Config) { c.BootstrapOverride = `{"static_resources": {"clusters": [{"name": ""}]}}` })
		st := waitStatus(t, r, "pod failed", func(s agentapi.Status) bool { return s.Failed })
		if st.Ready || !strings.Contains(st.Message, "validate bootstrap") {
			t.Errorf("status = %+v", st)
		}
		// A PUT with good settings recovers the pod.
		code, body := r.do(t, http.MethodPut, "/proxy-config", `{"logLevel": "debug", "concurrency": 1, "drainDuration": "3s", "parentShutdownDuration": "4s", "proxyPath": "/opt/test/envoy"}`)
		if code != http.StatusOK || !strings.Contains(body, `"restarted": true`) {
			t.Fatalf("PUT /proxy-config = %d %s", code, body)
		}
		waitStatus(t, r, "ready after the fix", func(s agentapi.Status) bool { return s.Ready && !s.Failed })
		r.stop(t)
	})
}

// A proxy whose admin port is taken exits at once, every time: the agent restarts it
// with backoff up to its budget, then marks the pod failed with the proxy's own stderr
// lines, which say why.
func TestRunAdminPortTakenFailsThePod(t *testing.T) {
	port := freePort(t)
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	r := startAgentTuned(t, "", func(c *Config) { c.AdminPort = port }, func(m *epochManager) { m.budget = 1 })
	st := waitStatus(t, r, "pod failed", func(s agentapi.Status) bool { return s.Failed })
	if st.Ready || !strings.Contains(st.Message, "exited unexpectedly 2 times in a row") || !strings.Contains(st.Message, "address already in use") {
		t.Errorf("status = %+v, want a failed pod whose message names the taken port", st)
	}
	r.stop(t)
}
