package lab

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/meshlab/meshlab/controlplane/config"
	"github.com/meshlab/meshlab/internal/testutil"
)

// serverObjectsApplied are applied with kubectl apply's record onto kubeViewScenario:
// a ServiceEntry the autoallocator addresses, one with addresses of its own, an
// HTTPRoute on the Gateway API Gateway, a ConfigMap.
const serverObjectsApplied = `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: external-svc, namespace: foo}
spec:
  hosts: [api.example.com, www.example.com]
  ports: [{number: 443, name: tls, protocol: TLS}]
  location: MESH_EXTERNAL
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: fixed, namespace: foo}
spec:
  hosts: [fixed.example.com]
  addresses: [192.0.2.10]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: httpbin, namespace: foo}
spec:
  parentRefs: [{name: gtw}]
  hostnames: [httpbin.example.com]
  rules: [{backendRefs: [{name: httpbin, port: 8000}]}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: foo}
data: {mode: fast}
`

var (
	goldenUID  = regexp.MustCompile(`uid: [0-9a-f-]{36}`)
	goldenTime = regexp.MustCompile(`"?\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"?`)
	// A node port is drawn from its Service's uid (TestAllocateNodePorts holds the rule).
	goldenNodePort = regexp.MustCompile(`nodePort: 3\d{4}`)
)

// TestKubeViewServerObjectsGolden holds `get -o yaml` of every kind the docs print as
// the API server returns it: uid, resourceVersion, generation, kubectl apply's record,
// the defaulted fields, the controllers' status (uids and times replaced, as they vary).
func TestKubeViewServerObjectsGolden(t *testing.T) {
	t.Parallel()
	sc, err := config.Load("kube.yaml", []byte(kubeViewScenario))
	if err != nil {
		t.Fatal(err)
	}
	sc, _, err = sc.Apply(config.File{Name: "applied.yaml", Data: []byte(serverObjectsApplied), LastApplied: true})
	if err != nil {
		t.Fatal(err)
	}
	m, err := sc.Build(config.BuildOptions{PodCIDR: netip.MustParsePrefix("10.244.0.0/16"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	v := kubeView{model: m, objects: sc.Objects, ready: map[string]bool{}, serviceCIDR: netip.MustParsePrefix("10.96.0.0/16"),
		started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), conds: &conditionClock{}, now: time.Now()}
	for _, p := range m.Pods {
		v.ready[p.Namespace+"/"+p.Name] = true
	}
	cases := []struct{ name, kind, namespace, object string }{
		{"service", "svc", "foo", "httpbin"},
		{"service-loadbalancer", "svc", "foo", "gtw-istio"},
		{"service-kubernetes", "svc", "default", "kubernetes"},
		{"deployment", "deploy", "foo", "curl"},
		{"deployment-made", "deploy", "foo", "gtw-istio"},
		{"serviceentry-autoallocated", "se", "foo", "external-svc"},
		{"serviceentry-addressed", "se", "foo", "fixed"},
		{"gateway-api-gateway", "gtw", "foo", "gtw"},
		{"httproute", "httproute", "foo", "httpbin"},
		{"istio-gateway", "gateways.networking.istio.io", "foo", "httpbin-gateway"},
		{"configmap", "cm", "foo", "settings"},
		{"namespace", "ns", "", "foo"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			objs := kubeSelect(t, v, tc.kind, tc.namespace, tc.object, "")
			if len(objs) != 1 {
				t.Fatalf("%s %s/%s: %d objects", tc.kind, tc.namespace, tc.object, len(objs))
			}
			y, err := yaml.JSONToYAML(objs[0])
			if err != nil {
				t.Fatal(err)
			}
			y = goldenUID.ReplaceAll(y, []byte("uid: <uid>"))
			y = goldenTime.ReplaceAll(y, []byte("<time>"))
			y = goldenNodePort.ReplaceAll(y, []byte("nodePort: <30000-32767>"))
			testutil.Golden(t, "kubeview/"+tc.name, y)
		})
	}
}

// TestKubeViewServerMetadataFollowsTheStore moves an object's resourceVersion on every
// write and its generation on spec changes only, and keeps its uid; what the lab made
// for it (a Deployment's pods) takes uids of their own, stable from read to read.
func TestKubeViewServerMetadataFollowsTheStore(t *testing.T) {
	t.Parallel()
	sc, err := config.Load("kube.yaml", []byte(kubeViewScenario))
	if err != nil {
		t.Fatal(err)
	}
	build := func(sc *config.Scenario) kubeView {
		t.Helper()
		m, err := sc.Build(config.BuildOptions{PodCIDR: netip.MustParsePrefix("10.244.0.0/16"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/16")})
		if err != nil {
			t.Fatal(err)
		}
		return kubeView{model: m, objects: sc.Objects, ready: map[string]bool{}}
	}
	type meta struct {
		Metadata struct {
			UID             string            `json:"uid"`
			ResourceVersion string            `json:"resourceVersion"`
			Generation      int64             `json:"generation"`
			Annotations     map[string]string `json:"annotations"`
		} `json:"metadata"`
		Status struct {
			ObservedGeneration int64 `json:"observedGeneration"`
		} `json:"status"`
	}
	read := func(v kubeView, kind, ns, name string) meta {
		t.Helper()
		objs := kubeSelect(t, v, kind, ns, name, "")
		if len(objs) != 1 {
			t.Fatalf("%s %s/%s: %d objects", kind, ns, name, len(objs))
		}
		var m meta
		if err := json.Unmarshal(objs[0], &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	v := build(sc)
	before := read(v, "deploy", "bar", "curl")
	pod := read(v, "pod", "bar", kubeSelectName(t, v, "pod", "bar"))
	if pod.Metadata.UID == "" || pod.Metadata.UID != read(v, "pod", "bar", kubeSelectName(t, v, "pod", "bar")).Metadata.UID || pod.Metadata.UID == before.Metadata.UID {
		t.Fatalf("pod uid %q: want one of its own, the same at each read", pod.Metadata.UID)
	}
	if before.Metadata.Generation != 1 || before.Status.ObservedGeneration != 1 {
		t.Fatalf("generation %d observed %d, want 1 and 1", before.Metadata.Generation, before.Status.ObservedGeneration)
	}
	scaled := `{apiVersion: apps/v1, kind: Deployment, metadata: {name: curl, namespace: bar, annotations: {meshlab.dev/deleted-pods: "[]"}},
  spec: {replicas: 2, selector: {matchLabels: {app: curl}}, template: {metadata: {labels: {app: curl}}, spec: {containers: [{name: curl, image: curlimages/curl, command: [/bin/sleep, infinity]}]}}}}`
	sc, _, err = sc.Apply(config.File{Name: "scale.yaml", Data: []byte(scaled)})
	if err != nil {
		t.Fatal(err)
	}
	after := read(build(sc), "deploy", "bar", "curl")
	if after.Metadata.UID != before.Metadata.UID || after.Metadata.ResourceVersion == before.Metadata.ResourceVersion ||
		after.Metadata.Generation != 2 || after.Status.ObservedGeneration != 2 {
		t.Fatalf("scaled: %+v, before %+v: want the same uid, another resourceVersion, generation and observedGeneration 2", after, before)
	}
	if _, has := after.Metadata.Annotations["meshlab.dev/deleted-pods"]; has {
		t.Fatalf("annotations %v: meshlab's own are not the API server's", after.Metadata.Annotations)
	}
	if r := after.Metadata.Annotations[deploymentRevisionAnnotation]; r != "1" {
		t.Fatalf("scaled: revision %q, want 1 (the template is the same)", r)
	}
	restarted := strings.Replace(scaled, "metadata: {labels: {app: curl}}", "metadata: {labels: {app: curl}, annotations: {kubectl.kubernetes.io/restartedAt: x}}", 1)
	if sc, _, err = sc.Apply(config.File{Name: "restart.yaml", Data: []byte(restarted)}); err != nil {
		t.Fatal(err)
	}
	if r := read(build(sc), "deploy", "bar", "curl").Metadata.Annotations[deploymentRevisionAnnotation]; r != "2" {
		t.Fatalf("restarted: revision %q, want 2", r)
	}
}

// kubeSelectName returns the name of the first object of kind in namespace.
func kubeSelectName(t *testing.T, v kubeView, kind, ns string) string {
	t.Helper()
	objs := kubeSelect(t, v, kind, ns, "", "")
	if len(objs) == 0 {
		t.Fatalf("no %s in %s", kind, ns)
	}
	var m struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(objs[0], &m); err != nil {
		t.Fatal(err)
	}
	return m.Metadata.Name
}

// TestKubeViewObjectNamingNoNamespace: an object written without a namespace is shown
// in the one it was given, with the uid the store gave it.
func TestKubeViewObjectNamingNoNamespace(t *testing.T) {
	t.Parallel()
	sc, err := config.Load("kube.yaml", []byte(kubeViewScenario))
	if err != nil {
		t.Fatal(err)
	}
	sc, _, err = sc.Apply(config.File{Name: "cm.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain}\ndata: {a: b}\n"), LastApplied: true})
	if err != nil {
		t.Fatal(err)
	}
	var stored *config.Object
	for _, o := range sc.Objects {
		if o.Origin.Kind == "ConfigMap" && o.Origin.Name == "plain" {
			stored = o
		}
	}
	m, err := sc.Build(config.BuildOptions{PodCIDR: netip.MustParsePrefix("10.244.0.0/16"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	v := kubeView{model: m, objects: sc.Objects, ready: map[string]bool{}}
	objs := kubeSelect(t, v, "cm", "default", "plain", "")
	if len(objs) != 1 {
		t.Fatalf("%d objects", len(objs))
	}
	var got struct {
		Metadata struct{ Namespace, UID, ResourceVersion string } `json:"metadata"`
	}
	if err := json.Unmarshal(objs[0], &got); err != nil {
		t.Fatal(err)
	}
	if got.Metadata.Namespace != "default" || got.Metadata.UID != stored.UID || got.Metadata.ResourceVersion != fmt.Sprint(stored.ResourceVersion) {
		t.Fatalf("metadata %+v, want namespace default, uid %s, resourceVersion %d", got.Metadata, stored.UID, stored.ResourceVersion)
	}
}
