package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/lab"
	"github.com/meshlab/meshlab/web"
)

// fakeServices answers describe service for backend only.
type fakeServices struct{}

func (fakeServices) DescribeService(_ context.Context, namespace, name string) (api.ServiceView, error) {
	if name != "backend" {
		return api.ServiceView{}, fmt.Errorf("%w %q (services: backend)", api.ErrUnknownService, name)
	}
	return api.ServiceView{Name: name, Namespace: "default", Hostname: "backend.default.svc.cluster.local",
		Ports: []api.ServicePortView{{Name: "http", Port: 8080, TargetPort: 8080, Protocol: "HTTP", MTLS: "STRICT"}}}, nil
}

type fakeLabInfo struct{}

func (fakeLabInfo) Info() api.LabInfo {
	return api.LabInfo{Name: "q", Scenario: "hello.yaml", PodCIDR: netip.MustParsePrefix("10.244.0.0/16"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/16")}
}

func (fakeLabInfo) Pods(context.Context) ([]api.PodStatus, error) {
	return []api.PodStatus{{Name: "frontend", Sidecar: true, Ready: true, Epoch: 1, DataPlane: "meshlab proxy", RequestsOut: 7}}, nil
}
func (fakeLabInfo) NameTable(context.Context, string, uint64) (api.NameTable, error) {
	return api.NameTable{}, api.ErrUnknownPod
}

// fakeRunningLab makes a run root holding lab q, "running" as this process, whose
// api.sock serves describe service; it returns the run root.
func fakeRunningLab(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	p := lab.PathsFor(root, "q")
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(lab.Record{Name: "q", PID: os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.Dir, "lab.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", p.APISocket())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(web.NewHandler(fakeLabInfo{}, slog.New(slog.DiscardHandler), web.ServiceRoutes(fakeServices{})))
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return root
}

// A query verb (describe service here) checks -o before it asks, prints the lab's answer
// as text, JSON or YAML, and hands back the lab's error.
func TestQueryLab(t *testing.T) {
	t.Parallel()
	root := fakeRunningLab(t)
	run := func(args ...string) (string, error) {
		cmd := newRootCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(append([]string{"--run-root", root, "--lab", "q"}, args...))
		err := cmd.Execute()
		return out.String(), err
	}
	out, err := run("describe", "service", "backend")
	if err != nil || !strings.Contains(out, "Hostname:   backend.default.svc.cluster.local") || !strings.Contains(out, "http  8080  8080    HTTP      STRICT") {
		t.Errorf("text: err=%v\n%s", err, out)
	}
	out, err = run("describe", "service", "backend", "-o", "json")
	var v api.ServiceView
	if err != nil || json.Unmarshal([]byte(out), &v) != nil || v.Ports[0].MTLS != "STRICT" {
		t.Errorf("json: err=%v\n%s", err, out)
	}
	out, err = run("describe", "service", "backend", "-o", "yaml")
	if err != nil || !strings.Contains(out, "mtls: STRICT") {
		t.Errorf("yaml: err=%v\n%s", err, out)
	}
	if _, err = run("describe", "service", "backend", "-o", "xml"); err == nil || !strings.Contains(err.Error(), `-o "xml"`) {
		t.Errorf("-o xml: err=%v, want the -o error", err)
	}
	if _, err = run("describe", "service", "nope"); err == nil || err.Error() != `unknown service "nope" (services: backend)` {
		t.Errorf("unknown service: err=%v, want the lab's message", err)
	}

	out, err = run("status")
	if err != nil || !strings.Contains(out, "lab q (hello.yaml), pods 10.244.0.0/16") || !strings.Contains(out, "frontend") || !strings.Contains(out, "meshlab proxy") {
		t.Errorf("status: err=%v\n%s", err, out)
	}
	out, err = run("status", "-o", "json")
	var st labStatus
	if err != nil || json.Unmarshal([]byte(out), &st) != nil || st.Lab.Name != "q" || len(st.Pods) != 1 || st.Pods[0].RequestsOut != 7 {
		t.Errorf("status -o json: err=%v\n%s", err, out)
	}
}
