package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// serverFieldsObjects are applied to the hello lab: a VirtualService on its backend, a
// ServiceEntry the autoallocator addresses, and a Service written without the fields
// the API server defaults.
const serverFieldsObjects = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: backend-route
spec:
  hosts: [backend]
  http:
  - route:
    - destination: {host: backend}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: external-api
spec:
  hosts: [api.example.com]
  ports: [{number: 443, name: tls, protocol: TLS}]
  location: MESH_EXTERNAL
  resolution: DNS
---
apiVersion: v1
kind: Service
metadata:
  name: plain
spec:
  selector: {app: backend}
  ports: [{name: http, port: 8080}]
`

// TestKubectlGetServerFields: `get -o yaml|json` shows what an API server returns:
// uid, resourceVersion, generation, creationTimestamp, kubectl apply's
// last-applied-configuration, the Service defaults, the autoallocator's ServiceEntry
// addresses; a spec change moves resourceVersion and generation, a label only the
// resourceVersion; -o jsonpath and -o custom-columns read the same objects.
func TestKubectlGetServerFields(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, "../scenarios/hello.yaml")
	run := func(args ...string) string {
		t.Helper()
		out, err := meshlab(t, append([]string{"--lab", l.name}, args...)...)
		if err != nil {
			t.Fatalf("meshlab %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	file := filepath.Join(t.TempDir(), "objects.yaml")
	if err := os.WriteFile(file, []byte(serverFieldsObjects), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := run("apply", "-f", file); out != "virtualservice.networking.istio.io/backend-route created\nserviceentry.networking.istio.io/external-api created\nservice/plain created\n" {
		t.Fatalf("apply: %q", out)
	}

	type meta struct {
		UID               string            `json:"uid"`
		ResourceVersion   string            `json:"resourceVersion"`
		Generation        int64             `json:"generation"`
		CreationTimestamp string            `json:"creationTimestamp"`
		Annotations       map[string]string `json:"annotations"`
		Labels            map[string]string `json:"labels"`
	}
	getVS := func() meta {
		t.Helper()
		var vs struct {
			Metadata meta `json:"metadata"`
		}
		if err := json.Unmarshal([]byte(run("get", "vs", "backend-route", "-o", "json")), &vs); err != nil {
			t.Fatal(err)
		}
		return vs.Metadata
	}
	first := getVS()
	record := `{"apiVersion":"networking.istio.io/v1","kind":"VirtualService","metadata":{"annotations":{},"name":"backend-route","namespace":"default"},"spec":{"hosts":["backend"],"http":[{"route":[{"destination":{"host":"backend"}}]}]}}` + "\n"
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`).MatchString(first.UID) || first.ResourceVersion == "" ||
		first.Generation != 1 || first.CreationTimestamp == "" || first.Annotations["kubectl.kubernetes.io/last-applied-configuration"] != record {
		t.Fatalf("get vs backend-route -o json: metadata %+v\nwant a uid, a resourceVersion, generation 1, a creationTimestamp and apply's record %q", first, record)
	}
	yml := run("get", "vs", "backend-route", "-o", "yaml")
	for _, want := range []string{"  uid: " + first.UID + "\n", "  resourceVersion: \"" + first.ResourceVersion + "\"\n", "  generation: 1\n",
		"    kubectl.kubernetes.io/last-applied-configuration: |\n      " + record} {
		if !strings.Contains(yml, want) {
			t.Errorf("get vs backend-route -o yaml:\n%s\nwant %q in it", yml, want)
		}
	}

	// A spec change: resourceVersion and generation move, uid and creation stay.
	changed := strings.Replace(serverFieldsObjects, "    - destination: {host: backend}\n", "    - destination: {host: backend}\n    timeout: 5s\n", 1)
	if err := os.WriteFile(file, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := run("apply", "-f", file); !strings.Contains(out, "virtualservice.networking.istio.io/backend-route configured\n") || !strings.Contains(out, "service/plain unchanged\n") {
		t.Fatalf("apply the change: %q", out)
	}
	second := getVS()
	if second.UID != first.UID || second.CreationTimestamp != first.CreationTimestamp || second.ResourceVersion == first.ResourceVersion || second.Generation != 2 {
		t.Fatalf("after a spec change: %+v, before %+v: want the same uid and creation, another resourceVersion, generation 2", second, first)
	}
	// A label: metadata only, the generation stays.
	run("label", "vs", "backend-route", "team=a")
	third := getVS()
	if third.ResourceVersion == second.ResourceVersion || third.Generation != 2 || third.Labels["team"] != "a" {
		t.Fatalf("after a label: %+v, before %+v: want another resourceVersion, generation 2, the label", third, second)
	}

	// -o jsonpath and -o custom-columns read the same object.
	if got := run("get", "vs", "backend-route", "-o", "jsonpath={.metadata.resourceVersion} {.metadata.generation}"); got != third.ResourceVersion+" 2" {
		t.Errorf("jsonpath: %q, want %q", got, third.ResourceVersion+" 2")
	}
	cols := run("get", "vs", "-o", "custom-columns=NAME:.metadata.name,RV:.metadata.resourceVersion,GEN:.metadata.generation")
	if !regexp.MustCompile(`(?m)^NAME\s+RV\s+GEN\nbackend-route\s+` + third.ResourceVersion + `\s+2\n$`).MatchString(cols) {
		t.Errorf("custom-columns:\n%s", cols)
	}

	// Several names: one table, as kubectl's.
	both := run("get", "vs/backend-route", "svc/plain", "-o", "custom-columns=KIND:.kind,NAME:.metadata.name")
	if !regexp.MustCompile(`^KIND\s+NAME\nVirtualService\s+backend-route\nService\s+plain\n$`).MatchString(both) {
		t.Errorf("custom-columns of two names:\n%s", both)
	}

	// The Service as the API server defaults it.
	var svc struct {
		Spec struct {
			ClusterIP       string   `json:"clusterIP"`
			ClusterIPs      []string `json:"clusterIPs"`
			IPFamilies      []string `json:"ipFamilies"`
			IPFamilyPolicy  string   `json:"ipFamilyPolicy"`
			SessionAffinity string   `json:"sessionAffinity"`
			Type            string   `json:"type"`
			Ports           []struct {
				Protocol   string `json:"protocol"`
				Port       int    `json:"port"`
				TargetPort any    `json:"targetPort"`
			} `json:"ports"`
		} `json:"spec"`
	}
	if err := json.Unmarshal([]byte(run("get", "svc", "plain", "-o", "json")), &svc); err != nil {
		t.Fatal(err)
	}
	s := svc.Spec
	if s.ClusterIP == "" || len(s.ClusterIPs) != 1 || s.ClusterIPs[0] != s.ClusterIP || len(s.IPFamilies) != 1 || s.IPFamilies[0] != "IPv4" || s.IPFamilyPolicy != "SingleStack" ||
		s.SessionAffinity != "None" || s.Type != "ClusterIP" || len(s.Ports) != 1 || s.Ports[0].Protocol != "TCP" || s.Ports[0].TargetPort != float64(8080) {
		t.Errorf("get svc plain -o json: spec %+v, want the API server's defaults", s)
	}

	// The autoallocator's address, in status as istiod writes it, is the one the
	// entry's host resolves to in the mesh.
	addr := run("get", "se", "external-api", "-o", "jsonpath={.status.addresses[0].value} {.status.addresses[0].host}")
	if !regexp.MustCompile(`^240\.240\.\d+\.\d+ api\.example\.com$`).MatchString(addr) {
		t.Errorf("get se external-api status.addresses[0]: %q, want 240.240.x.y api.example.com", addr)
	}
}
