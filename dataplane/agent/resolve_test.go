package agent

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
)

func TestResolveProxy(t *testing.T) {
	noEnvoy := func(string) (string, error) { return "", errors.New("not found") }
	for _, tc := range []struct {
		name   string
		cfg    Config
		env    string
		onPath string
		want   proxyBinary
	}{
		{name: "explicit path wins", cfg: Config{ProxyPath: "/opt/envoy"}, env: "/env/envoy", onPath: "/usr/bin/envoy",
			want: proxyBinary{Path: "/opt/envoy", DataPlane: agentapi.DataPlaneEnvoy}},
		{name: "env before PATH", env: "/env/envoy", onPath: "/usr/bin/envoy",
			want: proxyBinary{Path: "/env/envoy", DataPlane: agentapi.DataPlaneEnvoy}},
		{name: "envoy on PATH", onPath: "/usr/bin/envoy",
			want: proxyBinary{Path: "/usr/bin/envoy", DataPlane: agentapi.DataPlaneEnvoy}},
		{name: "meshlab path", cfg: Config{MeshlabPath: "/usr/local/bin/meshlab"},
			want: proxyBinary{Path: "/usr/local/bin/meshlab", Prefix: []string{"proxy"}, DataPlane: agentapi.DataPlaneMeshlabProxy}},
		{name: "this executable",
			want: proxyBinary{Path: "/proc/self/exe-ish", Prefix: []string{"proxy"}, DataPlane: agentapi.DataPlaneMeshlabProxy}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := lookup{
				getenv: func(k string) string {
					if k == EnvoyEnv {
						return tc.env
					}
					return ""
				},
				lookPath:   noEnvoy,
				executable: func() (string, error) { return "/proc/self/exe-ish", nil },
			}
			if tc.onPath != "" {
				l.lookPath = func(name string) (string, error) {
					if name != "envoy" {
						t.Errorf("looked up %q", name)
					}
					return tc.onPath, nil
				}
			}
			got, err := resolveProxy(tc.cfg, l)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestResolveProxyFindsFuncEInstalls(t *testing.T) {
	home, funce := t.TempDir(), t.TempDir()
	install := func(dir, version string, mode os.FileMode) {
		t.Helper()
		bin := filepath.Join(dir, version, "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bin, "envoy"), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	xdg := filepath.Join(home, ".local", "share", "func-e", "envoy-versions")
	install(xdg, "1.9.1", 0o755)
	install(xdg, "1.10.0", 0o755)
	install(xdg, "1.11.0", 0o644) // not executable: skipped
	env := map[string]string{}
	l := lookup{
		getenv:     func(k string) string { return env[k] },
		lookPath:   func(string) (string, error) { return "", errors.New("not found") },
		executable: func() (string, error) { return "/meshlab", nil },
		home:       func() (string, error) { return home, nil },
		readDir:    os.ReadDir, isExec: isExecutable,
	}
	got, err := resolveProxy(Config{}, l)
	if want := filepath.Join(xdg, "1.10.0", "bin", "envoy"); err != nil || got.Path != want || got.DataPlane != agentapi.DataPlaneEnvoy {
		t.Errorf("got %+v %v, want the newest executable func-e install %s", got, err, want)
	}
	install(filepath.Join(funce, "versions"), "1.2.0", 0o755)
	env[FuncEHomeEnv] = funce
	got, _ = resolveProxy(Config{}, l)
	if want := filepath.Join(funce, "versions", "1.2.0", "bin", "envoy"); got.Path != want {
		t.Errorf("with FUNC_E_HOME got %s, want %s", got.Path, want)
	}
	env[EnvoyEnv] = "/env/envoy"
	if got, _ = resolveProxy(Config{}, l); got.Path != "/env/envoy" {
		t.Errorf("MESHLAB_ENVOY must win over func-e: got %s", got.Path)
	}
}

func TestCompareVersions(t *testing.T) {
	vs := []string{"1.10.0", "1.9.1", "1.9", "1.30.2", "1.9.10"}
	slices.SortFunc(vs, compareVersions)
	if want := []string{"1.9", "1.9.1", "1.9.10", "1.10.0", "1.30.2"}; !slices.Equal(vs, want) {
		t.Errorf("sorted %q, want %q", vs, want)
	}
}

// The version of `meshlab proxy` of the agent's own executable is known without running
// it; any other binary is asked.
func TestOwnProxyVersion(t *testing.T) {
	dir := t.TempDir()
	self, other := filepath.Join(dir, "meshlab"), filepath.Join(dir, "meshlab-other")
	for _, p := range []string{self, other} {
		if err := os.WriteFile(p, []byte(p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(self, link); err != nil {
		t.Fatal(err)
	}
	l := lookup{executable: func() (string, error) { return self, nil }}
	for _, tc := range []struct {
		name string
		bin  proxyBinary
		want bool
	}{
		{name: "own binary", bin: proxyBinary{Path: self, Prefix: []string{"proxy"}, DataPlane: agentapi.DataPlaneMeshlabProxy}, want: true},
		{name: "own binary by another name", bin: proxyBinary{Path: link, Prefix: []string{"proxy"}, DataPlane: agentapi.DataPlaneMeshlabProxy}, want: true},
		{name: "another meshlab", bin: proxyBinary{Path: other, Prefix: []string{"proxy"}, DataPlane: agentapi.DataPlaneMeshlabProxy}},
		{name: "envoy", bin: proxyBinary{Path: self, DataPlane: agentapi.DataPlaneEnvoy}},
		{name: "missing", bin: proxyBinary{Path: filepath.Join(dir, "gone"), Prefix: []string{"proxy"}, DataPlane: agentapi.DataPlaneMeshlabProxy}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, ok := ownProxyVersion(tc.bin, l)
			if ok != tc.want || (ok && v != BuiltinProxyVersion) {
				t.Errorf("ownProxyVersion = %q, %t; want known=%t", v, ok, tc.want)
			}
		})
	}
}
