package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// prometheusRBAC is the RBAC of Istio's samples/addons/prometheus.yaml, as it writes it.
const prometheusRBAC = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  labels:
    app.kubernetes.io/name: prometheus
  name: prometheus
rules:
  - apiGroups: [""]
    resources: [nodes, nodes/proxy, nodes/metrics, services, endpoints, pods, ingresses, configmaps]
    verbs: [get, list, watch]
  - nonResourceURLs: ["/metrics"]
    verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: prometheus
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: prometheus
subjects:
  - kind: ServiceAccount
    name: prometheus
    namespace: istio-system
`

// TestKubectlStoredKindsAndNotFound: the kinds a lab keeps without acting on them (a
// sample's ClusterRole and ClusterRoleBinding) are created (create -f, which refuses
// them once they exist, as kubectl's), listed in kubectl's columns, described as kubectl
// describes them (with the lab's note on stderr), shown with -o yaml and deleted as kubectl does them; deleting what is gone is kubectl's
// NotFound, and silent with --ignore-not-found; several objects are each done on their
// own. Istio's own ConfigMaps in istio-system hold the lab's mesh config.
func TestKubectlStoredKindsAndNotFound(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, "../scenarios/hello.yaml")
	run := func(args ...string) (string, error) {
		t.Helper()
		return meshlab(t, append([]string{"--lab", l.name}, args...)...)
	}
	rbac := filepath.Join(t.TempDir(), "rbac.yaml")
	if err := os.WriteFile(rbac, []byte(prometheusRBAC), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run("create", "-f", rbac)
	if err != nil || out != "clusterrole.rbac.authorization.k8s.io/prometheus created\nclusterrolebinding.rbac.authorization.k8s.io/prometheus created\n" {
		t.Fatalf("create -f: %v\n%q", err, out)
	}
	// kubectl create refuses what exists; apply takes it, configured with its record
	// patched in and kubectl's warning (stderr) that create left none.
	exists := "Error from server (AlreadyExists): error when creating \"" + rbac + "\": clusterroles.rbac.authorization.k8s.io \"prometheus\" already exists\n" +
		"Error from server (AlreadyExists): error when creating \"" + rbac + "\": clusterrolebindings.rbac.authorization.k8s.io \"prometheus\" already exists\n"
	if out, err := run("create", "-f", rbac); err == nil || out != exists {
		t.Errorf("create -f again: %v\n%q, want %q", err, out, exists)
	}
	if out, err := run("apply", "-f", rbac); err != nil || !strings.Contains(out, "clusterrole.rbac.authorization.k8s.io/prometheus configured\n") ||
		!strings.Contains(out, "Warning: resource clusterroles/prometheus is missing the kubectl.kubernetes.io/last-applied-configuration annotation which is required by kubectl apply.") {
		t.Errorf("apply after create: %v\n%q", err, out)
	}
	if out, err := run("get", "clusterrole", "prometheus"); err != nil || !regexp.MustCompile(`^NAME\s+CREATED AT\nprometheus\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\n$`).MatchString(out) {
		t.Errorf("get clusterrole prometheus: %v\n%s", err, out)
	}
	if out, err := run("get", "clusterrolebindings"); err != nil || !regexp.MustCompile(`^NAME\s+ROLE\s+AGE\nprometheus\s+ClusterRole/prometheus\s+\S+\n$`).MatchString(out) {
		t.Errorf("get clusterrolebindings: %v\n%s", err, out)
	}
	if out, err := run("get", "clusterrole", "prometheus", "-o", "yaml"); err != nil || !strings.Contains(out, "kind: ClusterRole\n") || !strings.Contains(out, "- /metrics\n") {
		t.Errorf("get clusterrole prometheus -o yaml: %v\n%s", err, out)
	}
	if out, err := run("describe", "clusterrole", "prometheus"); err != nil || !strings.HasPrefix(out, "Name:         prometheus\nLabels:       app.kubernetes.io/name=prometheus\nAnnotations:  <none>\nPolicyRule:\n") ||
		!regexp.MustCompile(`\n  nodes/metrics +\[\] +\[\] +\[get list watch\]\n`).MatchString(out) ||
		!strings.HasSuffix(out, "Note (meshlab): clusterrole.rbac.authorization.k8s.io/prometheus is stored, no effect: RBAC: a lab has no API clients to authorize\n") {
		t.Errorf("describe clusterrole prometheus: %v\n%s", err, out)
	}
	if out, err := run("describe", "clusterrolebinding/prometheus"); err != nil || !strings.Contains(out, "Role:\n  Kind:  ClusterRole\n  Name:  prometheus\nSubjects:\n") {
		t.Errorf("describe clusterrolebinding/prometheus: %v\n%s", err, out)
	}
	if out, err := run("delete", "clusterrole", "prometheus"); err != nil || out != "clusterrole.rbac.authorization.k8s.io \"prometheus\" deleted\n" {
		t.Errorf("delete clusterrole prometheus: %v\n%q", err, out)
	}
	const gone = "Error from server (NotFound): clusterroles.rbac.authorization.k8s.io \"prometheus\" not found\n"
	if out, err := run("delete", "clusterrole", "prometheus"); err == nil || out != gone {
		t.Errorf("delete clusterrole prometheus again: %v\n%q, want %q", err, out, gone)
	}
	if out, err := run("delete", "virtualservice", "nope"); err == nil || out != "Error from server (NotFound): virtualservices.networking.istio.io \"nope\" not found\n" {
		t.Errorf("delete virtualservice nope: %v\n%q", err, out)
	}
	if out, err := run("delete", "clusterrole", "prometheus", "--ignore-not-found"); err != nil || out != "" {
		t.Errorf("delete --ignore-not-found: %v\n%q, want nothing", err, out)
	}
	if out, err := run("get", "clusterrolebinding", "prometheus"); err != nil || !strings.Contains(out, "ClusterRole/prometheus") {
		t.Errorf("the binding went with its role: %v\n%s", err, out)
	}
	// Istio's mesh config as its install keeps it: ConfigMap istio in istio-system, key
	// mesh (the Egress control page reads it).
	if out, err := run("get", "configmap", "istio", "-n", "istio-system", "-o", "jsonpath={.data.mesh}"); err != nil || !strings.Contains(out, "outboundTrafficPolicy:\n  mode: ALLOW_ANY\n") {
		t.Errorf("get configmap istio -n istio-system -o jsonpath={.data.mesh}: %v\n%s", err, out)
	}
	if out, err := run("get", "configmap", "istio", "-n", "istio-system", "-o", "yaml"); err != nil || !strings.Contains(out, "  meshNetworks: 'networks: {}'\n") || !strings.Contains(out, "kind: ConfigMap\n") {
		t.Errorf("get configmap istio -n istio-system -o yaml: %v\n%s", err, out)
	}
	if out, err := run("get", "cm", "-n", "istio-system"); err != nil || !regexp.MustCompile(`^NAME\s+DATA\s+AGE\nistio\s+2\s+\S+\nistio-sidecar-injector\s+2\s+\S+\n$`).MatchString(out) {
		t.Errorf("get cm -n istio-system: %v\n%s", err, out)
	}
	// kubectl does each object on its own: create -f makes what is missing and refuses
	// what exists, delete removes what exists and names what does not, exit status 1.
	want := "clusterrole.rbac.authorization.k8s.io/prometheus created\n" +
		"Error from server (AlreadyExists): error when creating \"" + rbac + "\": clusterrolebindings.rbac.authorization.k8s.io \"prometheus\" already exists\n"
	if out, err := run("create", "-f", rbac); err == nil || out != want {
		t.Errorf("create -f with the binding there: %v\n%q, want %q", err, out, want)
	}
	want = "clusterrole.rbac.authorization.k8s.io \"prometheus\" deleted\n" +
		"Error from server (NotFound): clusterroles.rbac.authorization.k8s.io \"nope\" not found\n"
	if out, err := run("delete", "clusterrole", "prometheus", "nope"); err == nil || out != want {
		t.Errorf("delete clusterrole prometheus nope: %v\n%q, want %q", err, out, want)
	}
	want = "clusterrolebinding.rbac.authorization.k8s.io \"prometheus\" deleted\n" + gone
	if out, err := run("delete", "-f", rbac); err == nil || out != want {
		t.Errorf("delete -f with the role gone: %v\n%q, want %q", err, out, want)
	}
}
