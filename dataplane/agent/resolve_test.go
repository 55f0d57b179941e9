package agent

import (
	"errors"
	"reflect"
	"testing"
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
			want: proxyBinary{Path: "/opt/envoy", DataPlane: DataPlaneEnvoy}},
		{name: "env before PATH", env: "/env/envoy", onPath: "/usr/bin/envoy",
			want: proxyBinary{Path: "/env/envoy", DataPlane: DataPlaneEnvoy}},
		{name: "envoy on PATH", onPath: "/usr/bin/envoy",
			want: proxyBinary{Path: "/usr/bin/envoy", DataPlane: DataPlaneEnvoy}},
		{name: "meshlab path", cfg: Config{MeshlabPath: "/usr/local/bin/meshlab"},
			want: proxyBinary{Path: "/usr/local/bin/meshlab", Prefix: []string{"proxy"}, DataPlane: DataPlaneMeshlabProxy}},
		{name: "this executable",
			want: proxyBinary{Path: "/proc/self/exe-ish", Prefix: []string{"proxy"}, DataPlane: DataPlaneMeshlabProxy}},
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
