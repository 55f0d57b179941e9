package config

import (
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
)

// The manifests below are written the way Istio's samples write theirs (Deployments naming
// the sample images, a ServiceAccount per app, Services selecting the template labels).

const httpbinManifest = `apiVersion: v1
kind: ServiceAccount
metadata:
  name: httpbin
---
apiVersion: v1
kind: Service
metadata:
  name: httpbin
  labels: {app: httpbin, service: httpbin}
spec:
  ports:
  - name: http
    port: 8000
    targetPort: 8080
  selector: {app: httpbin}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: httpbin
spec:
  replicas: 1
  selector:
    matchLabels: {app: httpbin, version: v1}
  template:
    metadata:
      labels: {app: httpbin, version: v1}
    spec:
      serviceAccountName: httpbin
      containers:
      - image: docker.io/mccutchen/go-httpbin:v2.15.0
        imagePullPolicy: IfNotPresent
        name: httpbin
        resources: {requests: {cpu: 10m}}
        ports:
        - containerPort: 8080
`

const curlManifest = `apiVersion: v1
kind: ServiceAccount
metadata:
  name: curl
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: curl
spec:
  replicas: 1
  selector:
    matchLabels: {app: curl}
  template:
    metadata:
      labels: {app: curl}
    spec:
      terminationGracePeriodSeconds: 0
      serviceAccountName: curl
      containers:
      - name: curl
        image: curlimages/curl
        command: ["/bin/sleep", "infinity"]
        imagePullPolicy: IfNotPresent
        volumeMounts:
        - mountPath: /etc/curl/tls
          name: secret-volume
      volumes:
      - name: secret-volume
        secret:
          secretName: curl-secret
          optional: true
`

const reviewsManifest = `apiVersion: v1
kind: Service
metadata: {name: reviews, labels: {app: reviews}}
spec:
  ports: [{port: 9080, name: http}]
  selector: {app: reviews}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: reviews-v1
  labels: {app: reviews, version: v1}
spec:
  replicas: 2
  selector:
    matchLabels: {app: reviews, version: v1}
  template:
    metadata:
      labels: {app: reviews, version: v1}
    spec:
      serviceAccountName: bookinfo-reviews
      containers:
      - name: reviews
        image: docker.io/istio/examples-bookinfo-reviews-v1:1.20.3
        env: [{name: LOG_DIR, value: "/tmp/logs"}]
        ports: [{containerPort: 9080}]
        securityContext: {runAsUser: 1000}
`

func buildScenario(t *testing.T, yaml string) *model.Model {
	t.Helper()
	s, err := Load("k.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	m, err := s.Build(BuildOptions{PodCIDR: netip.MustParsePrefix("10.244.0.0/16"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/16")})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return m
}

func podsOf(m *model.Model, workload string) []*model.Pod {
	var out []*model.Pod
	for _, p := range m.Pods {
		if p.Workload == workload {
			out = append(out, p)
		}
	}
	return out
}

func TestKubernetesWorkloadsMakePodsAsKubernetes(t *testing.T) {
	t.Parallel()
	m := buildScenario(t, docs(httpbinManifest, curlManifest, reviewsManifest))

	deployPod := regexp.MustCompile(`^[a-z0-9-]+-[bcdfghjklmnpqrstvwxz2456789]{1,10}-[bcdfghjklmnpqrstvwxz2456789]{5}$`)
	httpbin := podsOf(m, "httpbin")
	if len(httpbin) != 1 {
		t.Fatalf("httpbin Deployment made %d pods, want 1", len(httpbin))
	}
	hb := httpbin[0]
	if !deployPod.MatchString(hb.Name) || !strings.HasPrefix(hb.Name, "httpbin-") {
		t.Errorf("pod name %q is not a Deployment's <name>-<pod-template-hash>-<suffix>", hb.Name)
	}
	if hb.Labels["pod-template-hash"] == "" || !strings.Contains(hb.Name, "-"+hb.Labels["pod-template-hash"]+"-") {
		t.Errorf("pod %s labels %v: want pod-template-hash in the name", hb.Name, hb.Labels)
	}
	if hb.ServiceAccount != "httpbin" || !slices.Equal(hb.Ports, []uint16{8080}) || !hb.Sidecar.Inject {
		t.Errorf("httpbin pod: sa %q ports %v inject %v", hb.ServiceAccount, hb.Ports, hb.Sidecar.Inject)
	}
	if hb.App.Persona != personaGoHTTPBin || hb.App.Image != "docker.io/mccutchen/go-httpbin:v2.15.0" || hb.App.ImageNote != "" {
		t.Errorf("httpbin pod app = %+v, want the go-httpbin persona", hb.App)
	}
	if svcs := m.ServicesFor(hb); len(svcs) != 1 || svcs[0].Name != "httpbin" {
		t.Errorf("the httpbin Service does not select the Deployment's pod")
	}

	curl := podsOf(m, "curl")
	if len(curl) != 1 || curl[0].App.Persona != personaSleep || len(curl[0].Ports) != 0 {
		t.Errorf("curl Deployment: %d pods, app %+v: want one pod that sleeps", len(curl), curl[0].App)
	}

	reviews := podsOf(m, "reviews-v1")
	if len(reviews) != 2 || reviews[0].Name == reviews[1].Name {
		t.Fatalf("reviews-v1 with replicas 2 made %d pods", len(reviews))
	}
	if reviews[0].Labels["pod-template-hash"] != reviews[1].Labels["pod-template-hash"] {
		t.Error("two replicas of one template have different pod-template-hash labels")
	}
	r := reviews[0]
	if r.App.Persona != "bookinfo-reviews-v1" || r.App.ImageNote != "" {
		t.Errorf("reviews-v1's image: app %+v, want the bookinfo-reviews-v1 persona", r.App)
	}
	unknown := buildScenario(t, strings.ReplaceAll(reviewsManifest, "istio/examples-bookinfo-reviews-v1", "example.org/reviews")).Pods[0]
	if unknown.App.Persona != "" || !strings.Contains(unknown.App.ImageNote, "example.org/reviews") {
		t.Errorf("an image meshlab does not know: app %+v, want the demo app and a note naming the image", unknown.App)
	}
	again := buildScenario(t, docs(httpbinManifest, curlManifest, reviewsManifest))
	if podsOf(again, "reviews-v1")[0].Name != r.Name {
		t.Error("pod names differ between two loads of one scenario")
	}
}

func TestKubernetesWorkloadKinds(t *testing.T) {
	t.Parallel()
	tmpl := "  selector: {matchLabels: {app: db}}\n  template:\n    metadata: {labels: {app: db}}\n    spec:\n      containers: [{name: db, image: example.org/db:1, ports: [{containerPort: 5432}]}]\n"
	m := buildScenario(t, docs(
		"apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\nspec:\n  replicas: 3\n  serviceName: db\n"+tmpl,
		"apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: agent}\nspec:\n"+strings.ReplaceAll(tmpl, "db", "agent"),
		"apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: cache}\nspec:\n  replicas: 2\n"+strings.ReplaceAll(tmpl, "db", "cache"),
		"apiVersion: v1\nkind: Pod\nmetadata: {name: solo, labels: {app: solo}}\nspec:\n  containers: [{name: c, image: busybox, command: [sleep, '3600']}]\n",
	))
	var names []string
	for _, p := range m.Pods {
		names = append(names, p.Name)
	}
	for _, want := range []string{"db-0", "db-1", "db-2", "solo"} {
		if !slices.Contains(names, want) {
			t.Errorf("pods %v: no %s", names, want)
		}
	}
	if n := len(podsOf(m, "agent")); n != 1 {
		t.Errorf("a DaemonSet made %d pods; a lab is one node, want 1", n)
	}
	if n := len(podsOf(m, "cache")); n != 2 {
		t.Errorf("a ReplicaSet of 2 made %d pods", n)
	}
	if p := podsOf(m, "db")[1]; p.Labels["statefulset.kubernetes.io/pod-name"] != "db-1" {
		t.Errorf("StatefulSet pod labels %v", p.Labels)
	}
}

func TestSidecarInjectionAsIstio(t *testing.T) {
	t.Parallel()
	ns := func(name, labels string) string {
		return "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + name + ", labels: {" + labels + "}}\n"
	}
	deploy := func(name, ns, podLabels string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: " + name + ", namespace: " + ns + "}\nspec:\n" +
			"  selector: {matchLabels: {app: " + name + "}}\n  template:\n    metadata: {labels: {app: " + name + podLabels + "}}\n" +
			"    spec: {containers: [{name: c, image: curlimages/curl}]}\n"
	}
	m := buildScenario(t, docs(
		ns("foo", "istio-injection: enabled"),
		ns("legacy", ""),
		ns("nomesh", "istio-injection: disabled"),
		ns("canary", "istio.io/rev: canary"),
		deploy("a", "foo", ""),
		deploy("b", "foo", ", sidecar.istio.io/inject: 'false'"),
		deploy("c", "legacy", ""),
		deploy("d", "legacy", ", sidecar.istio.io/inject: 'true'"),
		deploy("e", "nomesh", ""),
		deploy("f", "canary", ""),
		deploy("g", "default", ""),
	))
	for name, want := range map[string]bool{
		"a": true,  // namespace labelled istio-injection=enabled
		"b": false, // the pod's own label wins
		"c": false, // a declared namespace without injection labels, as Istio
		"d": true,  // the pod asks for it
		"e": false, // istio-injection=disabled
		"f": true,  // a revision label
		"g": true,  // a namespace no object declares: taken as labelled (a lab is a mesh)
	} {
		pods := podsOf(m, name)
		if len(pods) != 1 {
			t.Fatalf("%s: %d pods", name, len(pods))
		}
		if got := pods[0].Sidecar.Inject; got != want {
			t.Errorf("deployment %s: sidecar injected %v, want %v", name, got, want)
		}
	}
}

func TestKubernetesWorkloadErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, yaml, want string
	}{
		{
			name: "host network",
			yaml: "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {hostNetwork: true, containers: [{name: c, image: x}]}\n",
			want: "k.yaml: Pod default/p: spec.hostNetwork: is not supported: every meshlab pod has its own network namespace",
		},
		{
			name: "selector not matching the template",
			yaml: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  selector: {matchLabels: {app: x}}\n  template: {metadata: {labels: {app: w}}, spec: {containers: [{name: c, image: x}]}}\n",
			want: "k.yaml: Deployment default/d: spec.selector: does not match spec.template.metadata.labels (app=x): Kubernetes refuses such a Deployment",
		},
		{
			name: "unknown field, strictly",
			yaml: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  replica: 2\n",
			want: "k.yaml: Deployment default/d: spec.replica: unknown field",
		},
		{
			name: "wrong apiVersion",
			yaml: "apiVersion: extensions/v1beta1\nkind: Deployment\nmetadata: {name: d}\n",
			want: `k.yaml: Deployment default/d: apiVersion: "extensions/v1beta1" is not an apiVersion of kind Deployment (want "apps/v1")`,
		},
		{
			name: "reserved port",
			yaml: "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: x, ports: [{containerPort: 15001}]}]}\n",
			want: "k.yaml: Pod default/p: spec.containers[0].ports[0].containerPort: 15001 is reserved for the sidecar (the outbound capture port)",
		},
		{
			name: "pod name too long",
			yaml: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a-deployment-with-a-long-name}\nspec:\n  selector: {matchLabels: {app: x}}\n  template: {metadata: {labels: {app: x}}, spec: {containers: [{name: c, image: x}]}}\n",
			want: "more than 40 (each pod is a network namespace ml-<lab>-<pod>)",
		},
		{
			name: "prometheus.io/port not a port",
			yaml: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  selector: {matchLabels: {app: x}}\n  template: {metadata: {labels: {app: x}, annotations: {prometheus.io/port: http}}, spec: {containers: [{name: c, image: x}]}}\n",
			want: `k.yaml: Deployment default/d: spec.template.metadata.annotations[prometheus.io/port]: "http" is not a port (1-65535)`,
		},
		{
			name: "a secure metrics port that is not one",
			yaml: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  selector: {matchLabels: {app: x}}\n  template: {metadata: {labels: {app: x}, annotations: {proxy.istio.io/config: \"proxyMetadata:\\n  ENVOY_SECURE_METRICS_PORT: 'https'\\n\"}}, spec: {containers: [{name: c, image: x}]}}\n",
			want: `k.yaml: Deployment default/d: spec.template.metadata.annotations[proxy.istio.io/config].proxyMetadata.ENVOY_SECURE_METRICS_PORT: "https" is not a port (0 for none, or 1-65535)`,
		},
		{
			name: "an OUTPUT_CERTS that is not absolute",
			yaml: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  selector: {matchLabels: {app: x}}\n  template: {metadata: {labels: {app: x}, annotations: {proxy.istio.io/config: \"proxyMetadata:\\n  OUTPUT_CERTS: certs\\n\"}}, spec: {containers: [{name: c, image: x}]}}\n",
			want: `k.yaml: Deployment default/d: spec.template.metadata.annotations[proxy.istio.io/config].proxyMetadata.OUTPUT_CERTS: "certs" is not an absolute path`,
		},
		{
			name: "Service selecting no template",
			yaml: docs("apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {selector: {app: nobody}, ports: [{port: 80}]}\n", curlManifest),
			want: "k.yaml: Service default/s: spec.selector: matches no Workload",
		},
	} {
		_, err := Load("k.yaml", []byte(tt.yaml))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v\nwant one containing %q", tt.name, err, tt.want)
		}
	}
}

func TestImageRepository(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"docker.io/kong/httpbin:0.1.0":                                  "kong/httpbin",
		"curlimages/curl":                                               "curlimages/curl",
		"localhost:5000/team/app:v1":                                    "team/app",
		"busybox@sha256:abc":                                            "busybox",
		"gcr.io/istio-release/app:1.2":                                  "istio-release/app",
		"registry.example.org:443/mccutchen/go-httpbin":                 "mccutchen/go-httpbin",
		"registry.istio.io/release/examples-bookinfo-details-v1:1.20.3": "istio/examples-bookinfo-details-v1",
		"registry.istio.io/testing/app:latest":                          "istio-testing/app",
	} {
		if got := imageRepository(in); got != want {
			t.Errorf("imageRepository(%q) = %q, want %q", in, got, want)
		}
	}
}

// A pod's prometheus.io annotations reach its sidecar's agent, which merges the app's
// metrics with the proxy's as pilot-agent does; scrape: "false" and sidecar-less pods opt out.
func TestPrometheusAnnotationsReachTheAgent(t *testing.T) {
	t.Parallel()
	deploy := func(name, annotations, labels string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: " + name + "}\nspec:\n  selector: {matchLabels: {app: " + name + "}}\n" +
			"  template:\n    metadata: {labels: {app: " + name + labels + "}, annotations: {" + annotations + "}}\n" +
			"    spec: {containers: [{name: c, image: curlimages/curl}]}\n"
	}
	m := buildScenario(t, docs(
		deploy("a", "prometheus.io/scrape: 'true', prometheus.io/port: '9090', prometheus.io/path: /custom", ""),
		deploy("b", "prometheus.io/port: '8080'", ""),
		deploy("c", "prometheus.io/scrape: 'false', prometheus.io/port: '9090'", ""),
		deploy("d", "prometheus.io/port: '9090'", ", sidecar.istio.io/inject: 'false'"),
	))
	for name, want := range map[string]struct {
		port uint16
		path string
	}{"a": {9090, "/custom"}, "b": {8080, ""}, "c": {}, "d": {}} {
		pods := podsOf(m, name)
		if len(pods) != 1 {
			t.Fatalf("%s: %d pods", name, len(pods))
		}
		if sc := pods[0].Sidecar; sc.AppMetricsPort != want.port || sc.AppMetricsPath != want.path {
			t.Errorf("deployment %s: app metrics %d %q, want %d %q", name, sc.AppMetricsPort, sc.AppMetricsPath, want.port, want.path)
		}
	}
}

func TestAmbientMetadataReachesTheModel(t *testing.T) {
	t.Parallel()
	m := buildScenario(t, docs(
		"apiVersion: v1\nkind: Namespace\nmetadata: {name: mesh, labels: {istio.io/dataplane-mode: ambient}, annotations: {note: x}}\n",
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a, namespace: mesh}\nspec:\n"+
			"  selector: {matchLabels: {app: a}}\n  template:\n    metadata: {labels: {app: a}, annotations: {ambient.istio.io/redirection: enabled}}\n"+
			"    spec: {containers: [{name: c, image: curlimages/curl}]}\n",
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: b, namespace: mesh}\nspec:\n"+
			"  selector: {matchLabels: {app: b}}\n  template:\n    metadata: {labels: {app: b, istio.io/dataplane-mode: none}}\n"+
			"    spec: {containers: [{name: c, image: curlimages/curl}]}\n",
		"apiVersion: meshlab.dev/v1alpha1\nkind: Workload\nmetadata: {name: w, annotations: {k: v}}\nspec: {labels: {app: w}}\n",
	))
	ns := m.Namespace("mesh")
	if ns == nil || ns.Labels[model.LabelDataplaneMode] != "ambient" || ns.Annotations["note"] != "x" {
		t.Fatalf("namespace mesh = %+v", ns)
	}
	if m.Namespace("default") != nil {
		t.Error("an undeclared namespace is in the model")
	}
	a, b, w := podsOf(m, "a")[0], podsOf(m, "b")[0], podsOf(m, "w")[0]
	if !a.AmbientRedirected() || model.DataplaneMode(m, a) != model.DataplaneAmbient {
		t.Errorf("pod a: annotations %v, mode %s", a.Annotations, model.DataplaneMode(m, a))
	}
	if got := model.DataplaneMode(m, b); got != model.DataplaneNone {
		t.Errorf("pod b labelled none: mode %s", got)
	}
	if w.Annotations["k"] != "v" || model.DataplaneMode(m, w) != model.DataplaneSidecar {
		t.Errorf("workload w: annotations %v, mode %s", w.Annotations, model.DataplaneMode(m, w))
	}
}

// Istio's injector decides a pod's sidecar when the pod is created: labelling a
// namespace (kubectl label, an apply of its Namespace) changes the pods made after, and
// the running pods keep theirs until they are replaced.
func TestInjectionDecidedAtPodCreation(t *testing.T) {
	t.Parallel()
	deploy := func(name string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: " + name + "}\nspec:\n" +
			"  selector: {matchLabels: {app: " + name + "}}\n  template:\n    metadata: {labels: {app: " + name + "}}\n" +
			"    spec: {containers: [{name: c, image: curlimages/curl}]}\n"
	}
	sc, err := Load("s.yaml", []byte(deploy("old")))
	if err != nil {
		t.Fatal(err)
	}
	running, err := sc.Build(defaultOpts)
	if err != nil {
		t.Fatal(err)
	}
	next, _, err := sc.Apply(File{Name: "ns.yaml", Data: []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: default, labels: {istio-injection: disabled}}\n")},
		File{Name: "new.yaml", Data: []byte(deploy("new"))})
	if err != nil {
		t.Fatal(err)
	}
	o := defaultOpts
	o.Keep = AllocationsOf(running)
	m, err := next.Build(o)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"old": true, "new": false} {
		if pods := podsOf(m, name); len(pods) != 1 || pods[0].Sidecar.Inject != want {
			t.Errorf("deployment %s after labelling default istio-injection=disabled: pods %v, want one with sidecar %v", name, pods, want)
		}
	}
	// Without a running lab (a fresh up) the namespace's label decides for every pod.
	if m, err = next.Build(defaultOpts); err != nil {
		t.Fatal(err)
	}
	if pods := podsOf(m, "old"); len(pods) != 1 || pods[0].Sidecar.Inject {
		t.Errorf("fresh build: old's pod has a sidecar in a namespace labelled disabled")
	}
}

// Istio's samples/addons/prometheus.yaml loads as Kubernetes takes it: its ClusterRole and
// ClusterRoleBinding are kept as written (a lab has no API clients, so nothing reads
// them), and its pod's second container (the config reloader, listed first) is a
// helper: the pod runs prometheus-server's app with every container's ports.
func TestIstioPrometheusAddonLoads(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(testutil.IstioSamples(t), "addons", "prometheus.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := Load("base.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	sc, changes, err := sc.Apply(File{Name: "prometheus.yaml", Data: data})
	if err != nil {
		t.Fatalf("apply prometheus.yaml: %v", err)
	}
	for _, k := range []string{"ClusterRole", "ClusterRoleBinding"} {
		if !slices.Contains(changes, Change{Ref: Ref{Kind: k, Namespace: DefaultNamespace, Name: "prometheus"}, Action: "created"}) {
			t.Errorf("%s prometheus not created (changes %+v)", k, changes)
		}
		if objs, err := sc.Find(k, "prometheus"); err != nil || len(objs) != 1 {
			t.Errorf("%s prometheus not kept: %v, %d objects", k, err, len(objs))
		}
	}
	var pod *model.Pod
	for _, o := range sc.Objects {
		if o.Origin.Kind == "Deployment" && o.Origin.Name == "prometheus" {
			pod = o.pods[0]
		}
	}
	if pod == nil {
		t.Fatal("no prometheus pod")
	}
	if pod.App.Image != "docker.io/prom/prometheus:v3.10.0" && !strings.Contains(pod.App.Image, "prom/prometheus") {
		t.Errorf("app image %q, want prometheus-server's", pod.App.Image)
	}
	if !strings.Contains(pod.App.ImageNote, "prometheus-server-configmap-reload") || !slices.Contains(pod.Ports, 9090) {
		t.Errorf("note %q ports %v: want the reloader named as a helper and port 9090", pod.App.ImageNote, pod.Ports)
	}
	// The lab runs Debian's prometheus on the container's args and its ConfigMap volume.
	m, err := sc.Build(defaultOpts)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range m.Pods {
		if p.Namespace == "istio-system" && p.Workload == "prometheus" {
			pod = p
		}
	}
	if pod.App.Persona != personaPrometheus || !slices.Contains(pod.App.Args, "--config.file=/etc/config/prometheus.yml") ||
		!slices.ContainsFunc(pod.App.Files, func(f model.File) bool { return f.Path == "/etc/config/prometheus.yml" }) {
		t.Errorf("persona %q args %v files %d: want prometheus with the container's args and /etc/config/prometheus.yml", pod.App.Persona, pod.App.Args, len(pod.App.Files))
	}
}

// Two namespaces may each have a pod of one name: each pod's sidecar is its own
// namespace's choice (a lookup by name alone gave the injected namespace's to both).
func TestInjectionSamePodNameTwoNamespaces(t *testing.T) {
	t.Parallel()
	pod := func(ns string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: httpbin, namespace: " + ns + "}\nspec: {containers: [{name: c, image: curlimages/curl}]}\n"
	}
	sc, err := Load("s.yaml", []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: plain}\n---\n"+
		"apiVersion: v1\nkind: Namespace\nmetadata: {name: side, labels: {istio-injection: enabled}}\n---\n"+pod("plain")+"---\n"+pod("side")))
	if err != nil {
		t.Fatal(err)
	}
	m, err := sc.Build(defaultOpts)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range m.Pods {
		if want := p.Namespace == "side"; p.Sidecar.Inject != want {
			t.Errorf("pod %s/%s has sidecar %v, want %v", p.Namespace, p.Name, p.Sidecar.Inject, want)
		}
	}
	if len(m.Pods) != 2 {
		t.Fatalf("pods %v", m.Pods)
	}
}

// A pod labelled on its own (kubectl label pod) keeps its labels in its workload's
// model.AnnotationPodLabels: that pod has them, its siblings their template's, and its
// name (the template's hash) does not change.
func TestPodLabelsOfAWorkload(t *testing.T) {
	t.Parallel()
	deploy := func(annotation string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: r, annotations: {" + annotation + "}}\nspec:\n  replicas: 2\n" +
			"  selector: {matchLabels: {app: r}}\n  template:\n    metadata: {labels: {app: r}}\n" +
			"    spec: {containers: [{name: c, image: curlimages/curl}]}\n"
	}
	before := podsOf(buildScenario(t, deploy("note: x")), "r")
	if len(before) != 2 {
		t.Fatalf("pods of r: %d", len(before))
	}
	own := `{"` + before[0].Name + `": {"app": "r", "pod-template-hash": "` + before[0].Labels["pod-template-hash"] + `", "istio.io/use-waypoint": "pw"}}`
	after := podsOf(buildScenario(t, deploy(model.AnnotationPodLabels+": '"+own+"'")), "r")
	if len(after) != 2 || after[0].Name != before[0].Name || after[1].Name != before[1].Name {
		t.Fatalf("pod names changed: %v, then %v", before, after)
	}
	if after[0].Labels[model.LabelUseWaypoint] != "pw" || after[0].Labels["app"] != "r" {
		t.Errorf("the labelled pod's labels: %v", after[0].Labels)
	}
	if _, ok := after[1].Labels[model.LabelUseWaypoint]; ok {
		t.Errorf("its sibling took its label: %v", after[1].Labels)
	}
	s, err := Load("k.yaml", []byte(deploy(model.AnnotationPodLabels+": '{\"p\": {\"istio.io/use-waypoint\": \"Not_A_Name\"}}'")))
	if err == nil {
		_, err = s.Build(BuildOptions{PodCIDR: netip.MustParsePrefix("10.244.0.0/16"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/16")})
	}
	if err == nil || !strings.Contains(err.Error(), model.AnnotationPodLabels) {
		t.Errorf("a bad label in %s: %v, want it refused", model.AnnotationPodLabels, err)
	}
}

// TestDeletedPodsGetSuccessors: a Deployment whose pods were deleted one by one
// (model.AnnotationDeletedPods, as `delete pod` keeps them) makes a successor of a new
// name for each, as its ReplicaSet would, and leaves the others as they were; a pod
// deleted again gets yet another name. A bad annotation is refused by name.
func TestDeletedPodsGetSuccessors(t *testing.T) {
	t.Parallel()
	names := func(yaml string) []string {
		t.Helper()
		var out []string
		for _, p := range podsOf(buildScenario(t, yaml), "reviews-v1") {
			out = append(out, p.Name)
		}
		slices.Sort(out)
		return out
	}
	withDeleted := func(deleted ...string) string {
		return strings.Replace(reviewsManifest, "  name: reviews-v1\n", "  name: reviews-v1\n  annotations:\n    "+model.AnnotationDeletedPods+": '[\""+strings.Join(deleted, `","`)+"\"]'\n", 1)
	}
	first := names(reviewsManifest)
	if len(first) != 2 {
		t.Fatalf("reviews-v1 made %v, want 2 pods", first)
	}
	second := names(withDeleted(first[0]))
	if slices.Contains(second, first[0]) || !slices.Contains(second, first[1]) || len(second) != 2 {
		t.Fatalf("after deleting %s: pods %v, want %s kept and a new one", first[0], second, first[1])
	}
	successor := second[0]
	if successor == first[1] {
		successor = second[1]
	}
	if !strings.HasPrefix(successor, strings.Join(strings.Split(first[0], "-")[:3], "-")+"-") {
		t.Errorf("successor %s is not of the same ReplicaSet as %s", successor, first[0])
	}
	third := names(withDeleted(first[0], successor))
	if slices.Contains(third, first[0]) || slices.Contains(third, successor) || !slices.Contains(third, first[1]) {
		t.Errorf("after deleting %s and %s: pods %v", first[0], successor, third)
	}
	bad := strings.Replace(reviewsManifest, "  name: reviews-v1\n", "  name: reviews-v1\n  annotations:\n    "+model.AnnotationDeletedPods+": 'x'\n", 1)
	if _, err := Load("k.yaml", []byte(bad)); err == nil || !strings.Contains(err.Error(), "metadata.annotations."+model.AnnotationDeletedPods+": is not a JSON list of pod names") {
		t.Errorf("a bad %s annotation: %v", model.AnnotationDeletedPods, err)
	}
}

// TestApplyKeepsPodState: applying a workload's manifest again keeps what the lab holds
// of its running pods (deleted pods, pods' own labels), as kubectl apply's three-way merge
// keeps annotations it did not write: the Deployment is unchanged and its pods keep their
// names; a manifest that writes the annotation itself wins.
func TestApplyKeepsPodState(t *testing.T) {
	t.Parallel()
	s, err := Load("k.yaml", []byte(reviewsManifest))
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.Build(BuildOptions{PodCIDR: netip.MustParsePrefix("10.244.0.0/16"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	first := podsOf(m, "reviews-v1")[0].Name
	deleted := strings.Replace(reviewsManifest, "  name: reviews-v1\n", "  name: reviews-v1\n  annotations:\n    "+model.AnnotationDeletedPods+": '[\""+first+"\"]'\n", 1)
	s2, _, err := s.Apply(File{Name: "k.yaml", Data: []byte(deleted)})
	if err != nil {
		t.Fatal(err)
	}
	names := func(s *Scenario) []string {
		t.Helper()
		m, err := s.Build(BuildOptions{PodCIDR: netip.MustParsePrefix("10.244.0.0/16"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/16")})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range podsOf(m, "reviews-v1") {
			out = append(out, p.Name)
		}
		slices.Sort(out)
		return out
	}
	after := names(s2)
	if slices.Contains(after, first) {
		t.Fatalf("pods %v still hold the deleted %s", after, first)
	}
	s3, changes, err := s2.Apply(File{Name: "k.yaml", Data: []byte(reviewsManifest)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range changes {
		if c.Ref.Kind == "Deployment" && c.Action != "unchanged" {
			t.Errorf("applying the manifest again: Deployment %s, want unchanged", c.Action)
		}
	}
	if got := names(s3); !slices.Equal(got, after) {
		t.Errorf("applying the manifest again: pods %v, want %v (the deleted pod back)", got, after)
	}
	s4, _, err := s3.Apply(File{Name: "k.yaml", Data: []byte(strings.Replace(reviewsManifest, "  name: reviews-v1\n", "  name: reviews-v1\n  annotations:\n    "+model.AnnotationDeletedPods+": '[]'\n", 1))})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(s4); !slices.Contains(got, first) {
		t.Errorf("a manifest writing an empty list: pods %v, want %s back", got, first)
	}
}
