package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
)

// frontendWithDebug is hello's frontend Workload with a changed proxy log level.
const frontendWithDebug = `apiVersion: meshlab.dev/v1alpha1
kind: Workload
metadata: {name: frontend-v1, namespace: default}
spec:
  labels: {app: frontend, version: v1}
  serviceAccount: frontend
  ports: [8080]
  app: {upstreams: ["http://backend:8080/"]}
  sidecar: {inject: true, logLevel: debug, concurrency: 1}
`

// TestApplyProxySettingsStartsEpoch applies a Workload whose only change is its proxy
// settings: the pod's agent starts epoch 1 with the new command line, which goes LIVE
// and keeps serving; re-applying the same file starts nothing.
func TestApplyProxySettingsStartsEpoch(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t)
	paths := lab.PathsFor(lab.DefaultRunRoot, l.name)
	lc := api.NewUnixClient(paths.APISocket())
	t.Cleanup(lc.Close)
	const pod = "frontend-v1"
	waitEpochLive(t, lc, pod, 0)

	file := filepath.Join(t.TempDir(), "frontend.yaml")
	if err := os.WriteFile(file, []byte(frontendWithDebug), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := meshlab(t, "apply", "--name", l.name, "-f", file)
	if err != nil || !strings.Contains(out, "workload.meshlab.dev/frontend-v1 ") {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	waitEpochLive(t, lc, pod, 1)
	d, err := lc.PodDetail(context.Background(), pod)
	if err != nil || d.Proxy == nil {
		t.Fatalf("describe %s: %+v %v", pod, d, err)
	}
	if e := d.Proxy.Epochs[len(d.Proxy.Epochs)-1]; e.Epoch != 1 || e.Reason != "config" {
		t.Errorf("newest epoch = %+v, want epoch 1 started for a config change", e)
	}
	if d.Proxy.Settings.LogLevel != "debug" || d.Proxy.Settings.Concurrency != 1 {
		t.Errorf("agent settings = %+v, want logLevel debug, concurrency 1", d.Proxy.Settings)
	}
	opts := serverInfo(t, paths.AgentSocket(pod)).GetCommandLineOptions()
	if opts.GetRestartEpoch() != 1 || opts.GetLogLevel() != "debug" || opts.GetConcurrency() != 1 {
		t.Errorf("server_info command_line_options = restart_epoch %d, log_level %q, concurrency %d; want 1, debug, 1",
			opts.GetRestartEpoch(), opts.GetLogLevel(), opts.GetConcurrency())
	}
	// Traffic still flows through the reconfigured sidecar.
	if out, err := meshlab(t, "exec", "--name", l.name, pod, "--", "curl", "-sS", "-m", "5", "http://backend:8080/"); err != nil || !strings.Contains(out, `"service":"backend"`) {
		t.Errorf("curl through the new epoch: %v\n%s", err, out)
	}

	// The same file again changes nothing: apply pushes settings only for changed pods,
	// synchronously, so the epochs are final when it returns.
	out, err = meshlab(t, "apply", "--name", l.name, "-f", file)
	if err != nil {
		t.Fatalf("re-apply: %v\n%s", err, out)
	}
	d, err = lc.PodDetail(context.Background(), pod)
	if err != nil || d.Proxy == nil {
		t.Fatalf("describe %s: %v", pod, err)
	}
	for _, e := range d.Proxy.Epochs {
		if e.Epoch > 1 {
			t.Errorf("re-applying the same file started epoch %d (%s)", e.Epoch, e.Reason)
		}
	}
}

// serverInfo reads the proxy's /server_info through the agent socket.
func serverInfo(t *testing.T, sock string) *adminv3.ServerInfo {
	t.Helper()
	c := agentapi.NewClient(sock)
	defer c.Close()
	body, err := c.AdminBytes(t.Context(), "server_info")
	if err != nil {
		t.Fatal(err)
	}
	var si adminv3.ServerInfo
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, &si); err != nil {
		t.Fatalf("parse server_info: %v\n%s", err, body)
	}
	return &si
}

// brokenWorkload is a pod whose pinned proxy binary does not exist, and one whose
// bootstrap override sets a field the built-in proxy does not implement, so it refuses
// to start (and keeps being restarted with backoff).
const brokenWorkload = `---
apiVersion: meshlab.dev/v1alpha1
kind: Workload
metadata: {name: broken, namespace: default}
spec:
  labels: {app: broken}
  ports: [8080]
  app: {}
  sidecar: {proxyPath: /nonexistent/envoy}
---
apiVersion: meshlab.dev/v1alpha1
kind: Workload
metadata: {name: rejected, namespace: default}
spec:
  labels: {app: rejected}
  ports: [8080]
  app: {}
  sidecar:
    dataPlane: meshlab
    bootstrapOverride: {stats_flush_interval: 7s}
`

// TestUpReportsFailedPod: pods whose proxy cannot start, or keeps exiting, do not hang
// or fail `up`: each is reported with the reason in the progress line (at once for a
// binary that cannot be started, after --timeout for a crash loop) and in the summary;
// the lab comes up, the other pods serve, and describe shows the failure.
func TestUpReportsFailedPod(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	hello, err := os.ReadFile("../scenarios/hello.yaml")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "broken.yaml")
	if err := os.WriteFile(file, append(hello, []byte(brokenWorkload)...), 0o644); err != nil {
		t.Fatal(err)
	}
	// 12 s, not less: on a loaded CI machine (load 30+) healthy pods took 6 s to be
	// ready, and with 5 s every pod was reported "not ready".
	l := startLab(t, file, "--timeout", "12s")
	out := l.out.String()
	line := lineWith(out, "pod broken ")
	if !strings.Contains(line, "FAILED") || !strings.Contains(line, "proxy cannot be started") || !strings.Contains(line, "/nonexistent/envoy") {
		t.Errorf("progress line for the broken pod = %q, want FAILED with the reason\n%s", line, out)
	}
	line = lineWith(out, "pod rejected ")
	if !strings.Contains(line, "FAILED: not ready within 12s: proxy epoch 0 exited") {
		t.Errorf("progress line for the rejected pod = %q, want FAILED after the timeout\n%s", line, out)
	}
	if !strings.Contains(out, "stats_flush_interval: field is not supported") {
		t.Errorf("up output does not name the bootstrap field the proxy refused:\n%s", out)
	}
	if summary := lineWith(out, "lab "+l.name+" is up"); !strings.Contains(summary, "3 of 5 pods ready") || !strings.Contains(summary, "failed: broken, rejected") {
		t.Errorf("summary = %q, want 3 of 5 pods ready and the failed pods named", summary)
	}
	if got, err := meshlab(t, "exec", "--name", l.name, "frontend-v1", "--", "curl", "-sS", "-m", "5", "http://frontend:8080/"); err != nil || !strings.Contains(got, `"service":"backend"`) {
		t.Errorf("the rest of the lab does not serve: %v\n%s", err, got)
	}
	got, err := meshlab(t, "describe", "pod", "--name", l.name, "broken")
	if err != nil || !strings.Contains(got, "/nonexistent/envoy") {
		t.Errorf("describe pod broken: %v\n%s", err, got)
	}
}
