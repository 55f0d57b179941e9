package istiodcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	networking "istio.io/api/networking/v1alpha3"
	"sigs.k8s.io/yaml"

	"github.com/meshlab/meshlab/controlplane/model"
)

func testModel() *model.Model {
	svc := &model.Service{Name: "backend", Namespace: "default", VIP: netip.MustParseAddr("10.96.0.10"),
		Ports: []model.ServicePort{{Name: "http", Port: 8080, TargetPort: 8080, Protocol: model.ProtocolHTTP}}, Selector: map[string]string{"app": "backend"}}
	pod := func(name, ip string, sidecar bool) *model.Pod {
		return &model.Pod{Name: name, Namespace: "default", Workload: name, Labels: map[string]string{"app": "backend", "version": "v1"},
			ServiceAccount: "backend", IP: netip.MustParseAddr(ip), Ports: []uint16{8080}, Sidecar: model.SidecarSpec{Inject: sidecar}}
	}
	m := model.New([]*model.Service{svc}, []*model.Pod{pod("backend-v1", "10.244.0.3", true), pod("plain", "10.244.0.4", false)})
	m.Istio.VirtualServices = []*model.IstioConfig[*networking.VirtualService]{{Name: "backend", Namespace: "default",
		Spec: &networking.VirtualService{Hosts: []string{"backend.default.svc.cluster.local"}}}}
	m.Secrets = []*model.Secret{{Name: "shop-credential", Namespace: "istio-system", Cert: []byte("CERT"), Key: []byte("KEY")}}
	return m
}

// The lab's objects reach istiod as a cluster's API server holds them.
func TestObjects(t *testing.T) {
	b, err := Objects(testModel(), "ml-t-node")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string][]map[string]any{}
	for _, doc := range strings.Split(string(b), "---\n") {
		var o map[string]any
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		kinds[o["kind"].(string)] = append(kinds[o["kind"].(string)], o)
	}
	for kind, n := range map[string]int{"Node": 1, "Namespace": 2, "ServiceAccount": 1, "Service": 1, "Pod": 2, "EndpointSlice": 1, "VirtualService": 1, "Secret": 1, "ConfigMap": 2} {
		if len(kinds[kind]) != n {
			t.Errorf("%d %s objects, want %d", len(kinds[kind]), kind, n)
		}
	}
	text := string(b)
	for _, want := range []string{"clusterIP: 10.96.0.10", "podIP: 10.244.0.3", "sidecar.istio.io/status", "security.istio.io/tlsMode: istio",
		"kubernetes.io/service-name: backend", "- 10.244.0.4", "nodeName: ml-t-node", "backend.default.svc.cluster.local",
		"type: kubernetes.io/tls", "tls.crt: Q0VSVA=="} {
		if !strings.Contains(text, want) {
			t.Errorf("objects lack %q:\n%s", want, text)
		}
	}
	// Only the sidecar pod carries the injector's marks.
	for _, p := range kinds["Pod"] {
		meta := p["metadata"].(map[string]any)
		ann, _ := meta["annotations"].(map[string]any)
		_, injected := ann["sidecar.istio.io/status"]
		if injected != (meta["name"] == "backend-v1") {
			t.Errorf("pod %v: injected=%v", meta["name"], injected)
		}
	}
	// The mesh config reaches istiod in the istio ConfigMap, as an install writes it.
	cms := map[string]map[string]any{}
	for _, cm := range kinds["ConfigMap"] {
		meta := cm["metadata"].(map[string]any)
		if meta["namespace"] != "istio-system" {
			t.Errorf("ConfigMap %v in %v; want istio-system", meta["name"], meta["namespace"])
		}
		cms[meta["name"].(string)], _ = cm["data"].(map[string]any)
	}
	if mesh, _ := cms[MeshConfigMap]["mesh"].(string); !strings.Contains(mesh, "outboundTrafficPolicy:") || !strings.Contains(mesh, "accessLogFile: /dev/stdout") {
		t.Errorf("ConfigMap %s's mesh: %q", MeshConfigMap, mesh)
	}
	if v, _ := cms[InjectorConfigMap]["values"].(string); !strings.Contains(v, `"istioNamespace":"istio-system"`) {
		t.Errorf("ConfigMap %s's values: %q", InjectorConfigMap, v)
	}
	mc, err := MeshConfig(model.MeshConfig{OutboundTrafficPolicy: model.RegistryOnly})
	if err != nil || !strings.Contains(string(mc), "REGISTRY_ONLY") || !strings.Contains(string(mc), "rootNamespace: istio-system") ||
		!strings.Contains(string(mc), "defaultProviders:\n  metrics:\n  - prometheus\n") {
		t.Errorf("mesh config %s (%v)", mc, err)
	}
}

// Find: the flag's path, else beside meshlab, else PATH, else how to build it.
func TestFind(t *testing.T) {
	dir := t.TempDir()
	meshlab := filepath.Join(dir, "meshlab")
	bin := filepath.Join(dir, Binary)
	t.Setenv("PATH", t.TempDir())
	if _, err := Find("", meshlab); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "make istiod") {
		t.Errorf("Find without a binary: %v; want ErrNotFound saying how to build it", err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if p, err := Find("", meshlab); err != nil || p != bin {
		t.Errorf("Find beside meshlab = %q, %v; want %s", p, err, bin)
	}
	if _, err := Find(filepath.Join(dir, "nope"), meshlab); err == nil || !strings.Contains(err.Error(), "--istiod-path") {
		t.Errorf("Find of a missing --istiod-path: %v", err)
	}
	t.Setenv("PATH", dir)
	if p, err := Find("", "/elsewhere/meshlab"); err != nil || p != bin {
		t.Errorf("Find on PATH = %q, %v", p, err)
	}
}

// TestFeedRefusedThenTaken: a feed istiod refuses is remembered (status shows it) until
// a later feed is taken.
func TestFeedRefusedThenTaken(t *testing.T) {
	dir, err := os.MkdirTemp("", "icp") // short: a unix socket path
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ln, err := net.Listen("unix", feedSocket(dir))
	if err != nil {
		t.Fatal(err)
	}
	refuse := true
	var mu sync.Mutex
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Method != http.MethodPut || r.URL.Path != "/state" {
			http.NotFound(w, r)
			return
		}
		if refuse {
			http.Error(w, "ConfigMap/istio-system/istio: data.mesh: invalid", http.StatusUnprocessableEntity)
			return
		}
		fmt.Fprintln(w, "1 changes")
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	sock := feedSocket(dir)
	d := &Istiod{opts: Options{Dir: dir}, client: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}}
	err = d.Feed(t.Context(), testModel())
	if err == nil || !strings.Contains(err.Error(), "istiod refused the lab's objects: ConfigMap/istio-system/istio: data.mesh: invalid") {
		t.Fatalf("Feed: %v; want istiod's refusal", err)
	}
	if r := d.Refused(); r == nil || r.Error() != err.Error() {
		t.Errorf("Refused() = %v; want %v", r, err)
	}
	mu.Lock()
	refuse = false
	mu.Unlock()
	if err := d.Feed(t.Context(), testModel()); err != nil {
		t.Fatal(err)
	}
	if r := d.Refused(); r != nil {
		t.Errorf("Refused() after a feed taken = %v; want nil", r)
	}
}

// istiod runs with ambient on for a lab with an ambient namespace, pod or waypoint, and
// off for a sidecar lab.
func TestAmbient(t *testing.T) {
	m := testModel()
	if Ambient(m) {
		t.Error("a sidecar lab runs istiod with ambient on")
	}
	m.Pods[1].Labels = map[string]string{model.LabelDataplaneMode: model.DataplaneModeAmbient}
	if !Ambient(m) {
		t.Error("a lab with an ambient pod runs istiod without ambient")
	}
	m = testModel()
	m.Namespaces = []*model.Namespace{{Name: "other", Labels: map[string]string{model.LabelDataplaneMode: model.DataplaneModeAmbient}}}
	if !Ambient(m) {
		t.Error("a lab with an ambient namespace runs istiod without ambient")
	}
}
