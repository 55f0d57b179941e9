package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/meshlab/meshlab/internal/testutil"
)

// curlSampleYAML is Istio's samples/curl/curl.yaml as the docs apply it with -n.
const curlSampleYAML = `apiVersion: v1
kind: ServiceAccount
metadata:
  name: curl
---
apiVersion: v1
kind: Service
metadata:
  name: curl
  labels: {app: curl, service: curl}
spec:
  ports:
  - port: 80
    name: http
  selector: {app: curl}
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
`

// TestKubectlLabelAnnotateCreate runs kubectl's create namespace, label and annotate as
// Istio's docs do, with kubectl's output and errors: the injection label decides the
// sidecar of the pods made after it (the running ones keep theirs, as the injector acts
// at pod creation), a namespace no object declares (default) can be labelled, and a
// changed value needs --overwrite.
func TestKubectlLabelAnnotateCreate(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, "../scenarios/hello.yaml")
	run := func(want string, args ...string) {
		t.Helper()
		out, err := meshlab(t, append([]string{"--lab", l.name}, args...)...)
		if err != nil || strings.TrimSpace(out) != want {
			t.Fatalf("meshlab %s: %v\n%s\nwant %q", strings.Join(args, " "), err, out, want)
		}
	}
	fails := func(want string, args ...string) {
		t.Helper()
		out, err := meshlab(t, append([]string{"--lab", l.name}, args...)...)
		if err == nil || !strings.Contains(out, want) {
			t.Fatalf("meshlab %s: %v\n%s\nwant an error saying %q", strings.Join(args, " "), err, out, want)
		}
	}
	curl := filepath.Join(t.TempDir(), "curl.yaml")
	if err := os.WriteFile(curl, []byte(curlSampleYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	sidecar := func() bool {
		t.Helper()
		out, err := meshlab(t, "--lab", l.name, "get", "pods", "-n", "foo", "-o", "json")
		var pods struct {
			Items []corev1.Pod `json:"items"`
		}
		if err != nil || json.Unmarshal([]byte(out), &pods) != nil || len(pods.Items) != 1 {
			t.Fatalf("get pods -n foo -o json: %v\n%s\nwant a List of curl's one pod", err, out)
		}
		return slices.ContainsFunc(pods.Items[0].Spec.Containers, func(c corev1.Container) bool { return c.Name == "istio-proxy" })
	}

	run("namespace/foo created", "create", "namespace", "foo")
	fails(`Error from server (AlreadyExists): namespaces "foo" already exists`, "create", "ns", "foo")
	run("namespace/foo labeled", "label", "namespace", "foo", "istio-injection=enabled")
	run("namespace/foo not labeled", "label", "namespace", "foo", "istio-injection=enabled")
	if out, err := meshlab(t, "--lab", l.name, "apply", "-n", "foo", "-f", curl); err != nil {
		t.Fatalf("apply -n foo -f curl.yaml: %v\n%s", err, out)
	}
	if !sidecar() {
		t.Fatal("curl in namespace foo labelled istio-injection=enabled has no sidecar")
	}
	fails("'istio-injection' already has a value (enabled), and --overwrite is false", "label", "namespace", "foo", "istio-injection=disabled")
	run("namespace/foo labeled", "label", "namespace", "foo", "istio-injection=disabled", "--overwrite")
	if !sidecar() {
		t.Fatal("the running curl pod lost its sidecar when its namespace was labelled: the injector acts when a pod is made")
	}
	if out, err := meshlab(t, "--lab", l.name, "delete", "-n", "foo", "-f", curl); err != nil {
		t.Fatalf("delete -n foo -f curl.yaml: %v\n%s", err, out)
	}
	if out, err := meshlab(t, "--lab", l.name, "apply", "-n", "foo", "-f", curl); err != nil {
		t.Fatalf("apply -n foo -f curl.yaml: %v\n%s", err, out)
	}
	if sidecar() {
		t.Fatal("curl made again in namespace foo labelled istio-injection=disabled has a sidecar")
	}
	run(`{"istio-injection":"disabled"}`, "get", "namespace", "foo", "-o", "jsonpath={.metadata.labels}")

	// default exists without an object; removing a label needs no --overwrite.
	run("namespace/default labeled", "label", "namespace", "default", "istio.io/dataplane-mode=ambient")
	run("istio.io/dataplane-mode=ambient", "label", "ns", "default", "--list")
	run("namespace/default unlabeled", "label", "ns/default", "istio.io/dataplane-mode-")
	fails(`Error from server (NotFound): namespaces "nope" not found`, "label", "namespace", "nope", "a=b")

	run("namespace/foo annotated", "annotate", "namespace", "foo", "note=one")
	fails("--overwrite is false but found the following declared annotation(s): 'note' already has a value (one)", "annotate", "namespace", "foo", "note=two")
	run("namespace/foo annotated", "annotate", "namespace", "foo", "note=two", "--overwrite")
	run("deployment.apps/curl annotated", "annotate", "-n", "foo", "deployment", "curl", "team=docs")
	run("deployment.apps/curl labeled", "label", "-n", "foo", "deploy", "--all", "tier=tools")
	// A Deployment's pod takes a label of its own, as a running pod does in Kubernetes.
	pod := strings.TrimSpace(mustMeshlab(t, "--lab", l.name, "get", "pods", "-n", "foo", "-o", "jsonpath={.items[0].metadata.name}"))
	run("pod/"+pod+" labeled", "label", "-n", "foo", "pod", pod, "x=y")
	run(pod, "get", "pods", "-n", "foo", "-l", "x=y", "-o", "jsonpath={.items[0].metadata.name}")
	// -l without -n acts in default, as kubectl's: the pod labelled x=y is in foo.
	fails("no objects passed to label", "label", "pod", "-l", "x=y", "z=1")
	fails("is made from a workload's template", "annotate", "-n", "foo", "pod", pod, "x=y")
	// delete KIND -l SELECTOR deletes what the selector matches, and only that.
	if out := mustMeshlab(t, "--lab", l.name, "delete", "-n", "foo", "deployment", "-l", "tier=tools"); !strings.HasPrefix(out, `deployment.apps "curl" deleted`+"\n") {
		t.Fatalf("delete -n foo deployment -l tier=tools:\n%s\nwant the curl deployment deleted", out)
	}
	run("No resources found in foo namespace.", "delete", "-n", "foo", "deployment", "-l", "tier=tools")
}

// mustMeshlab runs the binary and fails the test on an error.
func mustMeshlab(t *testing.T, args ...string) string {
	t.Helper()
	out, err := meshlab(t, args...)
	if err != nil {
		t.Fatalf("meshlab %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}
