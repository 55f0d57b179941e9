package proxy

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseArgsLikeEnvoy(t *testing.T) {
	o, err := ParseArgs(strings.Fields("-c /etc/envoy-rev3.json --restart-epoch 3 --base-id 7 --drain-time-s 45 " +
		"--drain-strategy immediate --parent-shutdown-time-s 60 --service-cluster web.default --service-node sidecar~x " +
		"-l warn --component-log-level upstream:debug --concurrency 2 --local-address-ip-version v4 --mode validate " +
		"--disable-hot-restart --allow-unknown-static-fields --file-flush-interval-msec 1000"))
	if err != nil {
		t.Fatal(err)
	}
	if o.ConfigPath != "/etc/envoy-rev3.json" || o.RestartEpoch != 3 || o.BaseID != 7 || o.DrainTime != 45*time.Second ||
		o.DrainStrategy != DrainImmediate || o.ParentShutdownTime != time.Minute || o.ServiceCluster != "web.default" ||
		o.ServiceNode != "sidecar~x" || o.LogLevelName != "warning" || o.ComponentLevels["upstream"] != -4 ||
		o.Concurrency != 2 || o.Mode != ModeValidate || !o.DisableHotRestart || !o.AllowUnknownStaticFields {
		t.Errorf("parsed %+v", o)
	}
	d, err := ParseArgs(nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.DrainTime != 600*time.Second || d.ParentShutdownTime != 900*time.Second || d.LogLevel != 0 || d.Mode != ModeServe {
		t.Errorf("defaults %+v, want Envoy's (600s, 900s, info, serve)", d)
	}
	for _, bad := range []string{"--bogus", "--drain-strategy slow", "--mode run", "-l loud", "--local-address-ip-version v5",
		"--restart-epoch 1 --use-dynamic-base-id", "stray"} {
		if _, err := ParseArgs(strings.Fields(bad)); !IsParseError(err) {
			t.Errorf("ParseArgs(%q) = %v, want a parse error", bad, err)
		}
	}
}

func TestMainExitCodesAndOutput(t *testing.T) {
	dir := t.TempDir()
	good := writeBootstrap(t, dir, testBootstrap(filepath.Join(dir, "xds.sock")))
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("node: {id: x}\nhds_config: {api_type: GRPC}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		args      string
		code      int
		out, errS string
	}{
		{"help", "--help", 0, "--restart-epoch uint32", ""},
		{"version", "--version", 0, "meshlab proxy  version: meshlab/1.0.0-dev/Clean/RELEASE/Go", ""},
		{"hot restart version goes to stderr", "--hot-restart-version", 0, "", HotRestartVersion + "\n"},
		{"hot restart version with hot restart disabled", "--hot-restart-version --disable-hot-restart", 0, "", "disabled\n"},
		{"a bad component log level is refused", "--component-log-level upstream:loud --mode validate -c " + good, 1, "", "error: "},
		{"an unknown component is refused", "--component-log-level nosuchlogger:debug --mode validate -c " + good, 1, "", "error: "},
		{"unknown flag", "--nope", 1, "", "PARSE ERROR: unknown flag: --nope"},
		{"validate ok", "--mode validate -c " + good, 0, "configuration '" + good + "' OK\n", ""},
		{"validate names the unsupported field", "--mode validate -c " + bad, 1, "", "bootstrap: hds_config: field is not supported by meshlab proxy"},
		{"missing config", "--mode validate", 1, "", "at least one of --config-path or --config-yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errB bytes.Buffer
			code := Main(context.Background(), strings.Fields(tc.args), &out, &errB)
			if code != tc.code || !strings.Contains(out.String(), tc.out) || !strings.Contains(errB.String(), tc.errS) {
				t.Errorf("code %d stdout %q stderr %q; want %d, %q, %q", code, out.String(), errB.String(), tc.code, tc.out, tc.errS)
			}
		})
	}
}

func TestLogLinesAreShapedLikeEnvoys(t *testing.T) {
	var b bytes.Buffer
	var out bytes.Buffer
	code := Main(context.Background(), []string{"--mode", "validate", "--config-yaml", "node: {id: x}\nadmin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}", "-l", "info"}, &out, &b)
	if code != 0 {
		t.Fatalf("code %d: %s", code, b.String())
	}
	line := strings.SplitN(b.String(), "\n", 2)[0]
	// [2026-11-22 05:00:00.000][1234][info][main] initializing epoch 0 ...
	if !logLine.MatchString(line) {
		t.Errorf("log line %q is not shaped like Envoy's", line)
	}
}
