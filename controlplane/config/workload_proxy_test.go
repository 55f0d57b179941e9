package config

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The proxy settings that live in the proxy's command line or bootstrap reach the model.
func TestWorkloadProxySettings(t *testing.T) {
	t.Parallel()
	yaml := docs(service(okService), workload("backend", okWorkload+`  app:
    startupCalls: ["http://backend:8080/"]
  sidecar:
    logLevel: debug
    concurrency: 4
    drainDuration: 2s
    parentShutdownDuration: 3s
    dataPlane: meshlab
    bootstrapOverride:
      stats_flush_interval: 7s
      static_resources:
        clusters: [{name: extra, type: STATIC, connect_timeout: 1s}]
`))
	s, err := Load("t.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.Build(BuildOptions{PodCIDR: netip.MustParsePrefix("10.244.0.0/16"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	sc := m.Pods[0].Sidecar
	if sc.LogLevel != "debug" || sc.Concurrency != 4 || sc.DrainDuration != 2*time.Second ||
		sc.ParentShutdownDuration != 3*time.Second || sc.DataPlane != "meshlab" {
		t.Errorf("sidecar = %+v", sc)
	}
	want := `{"static_resources":{"clusters":[{"connect_timeout":"1s","name":"extra","type":"STATIC"}]},"stats_flush_interval":"7s"}`
	if sc.BootstrapOverride != want {
		t.Errorf("bootstrap override = %s, want %s", sc.BootstrapOverride, want)
	}
	if got := m.Pods[0].App.StartupCalls; len(got) != 1 || got[0] != "http://backend:8080/" {
		t.Errorf("startup calls = %q", got)
	}
	if !reflect.DeepEqual(sc.WithoutProxySettings(), m.Pods[0].Sidecar.WithoutProxySettings()) || sc.WithoutProxySettings().LogLevel != "" {
		t.Errorf("WithoutProxySettings = %+v, want only inject and hold", sc.WithoutProxySettings())
	}
}

func TestWorkloadProxySettingsErrors(t *testing.T) {
	t.Parallel()
	yaml := docs(service(okService), workload("backend", okWorkload+`  app:
    startupCalls: ["ftp://backend/"]
  sidecar:
    concurrency: 100
    drainDuration: soon
    parentShutdownDuration: -1s
    dataPlane: nginx
    bootstrapOverride: {stats_flush: 7s}
`), workload("other", okWorkload+"  sidecar: {dataPlane: meshlab, proxyPath: /opt/envoy}\n"))
	_, err := Load("t.yaml", []byte(yaml))
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("Load = %v, want an ErrorList", err)
	}
	got := err.Error()
	for _, w := range []string{
		`Workload default/backend: spec.app.startupCalls[0]: "ftp://backend/" is not an http:// or https:// URL`,
		`Workload default/backend: spec.sidecar.concurrency: 100 is out of range 0-64`,
		`Workload default/backend: spec.sidecar.drainDuration: "soon" is not a non-negative duration such as "45s"`,
		`Workload default/backend: spec.sidecar.parentShutdownDuration: "-1s" is not a non-negative duration`,
		`Workload default/backend: spec.sidecar.dataPlane: "nginx" is not one of [envoy meshlab]`,
		`Workload default/backend: spec.sidecar.bootstrapOverride: not a valid envoy.config.bootstrap.v3.Bootstrap fragment: `,
		`Workload default/other: spec.sidecar.proxyPath: names an Envoy binary, but dataPlane is meshlab`,
	} {
		if !strings.Contains(got, w) {
			t.Errorf("missing error\n  %s\ngot:\n  %s", w, strings.ReplaceAll(got, "\n", "\n  "))
		}
	}
	if !strings.Contains(got, "stats_flush") {
		t.Errorf("the bootstrap override error does not name the unknown field:\n%s", got)
	}
}
