package kubeedit

import (
	"strings"
	"testing"
)

// A Service as the lab returns it after apply (its record, resourceVersion 7, the API
// server's defaults), and the file a learner saved from get -o yaml at version 5 with
// one port changed.
const (
	conflictCurrent = `{"apiVersion":"v1","kind":"Service","metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"annotations\":{},\"name\":\"plain\",\"namespace\":\"default\"},\"spec\":{\"ports\":[{\"name\":\"http\",\"port\":8080}],\"selector\":{\"app\":\"backend\"}}}\n"},"creationTimestamp":"2026-11-30T03:00:00Z","labels":{"team":"a"},"name":"plain","namespace":"default","resourceVersion":"7","uid":"0b6c6c1e-2b51-4d8e-9a55-0d5f3c1a2b3c"},"spec":{"clusterIP":"10.96.0.20","ports":[{"name":"http","port":8080,"protocol":"TCP","targetPort":8080}],"selector":{"app":"backend"},"sessionAffinity":"None","type":"ClusterIP"},"status":{"loadBalancer":{}}}`
	conflictSaved   = `{"apiVersion":"v1","kind":"Service","metadata":{"name":"plain","namespace":"default","resourceVersion":"5","uid":"0b6c6c1e-2b51-4d8e-9a55-0d5f3c1a2b3c"},"spec":{"ports":[{"name":"http","port":9090}],"selector":{"app":"backend"}}}`
)

// TestApplyConflictAsKubectlPrintsIt: the patch apply sends carries the saved file's
// resourceVersion and its change, and the 409 answer prints as kubectl's apply prints it.
func TestApplyConflictAsKubectlPrintsIt(t *testing.T) {
	t.Parallel()
	modified, err := WithApplyRecord([]byte(conflictSaved), "default", true)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := ApplyPatch(modified, []byte(conflictCurrent))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"resourceVersion":"5"`, `"port":9090`, `kubectl.kubernetes.io/last-applied-configuration`} {
		if !strings.Contains(string(patch), want) {
			t.Errorf("patch lacks %s: %s", want, patch)
		}
	}
	err = ApplyConflict("plain.yaml", "v1", "Service", "services", "plain", "default", patch,
		`Operation cannot be fulfilled on services "plain": the object has been modified; please apply your changes to the latest version and try again`)
	want := "Error from server (Conflict): error when applying patch:\n" + string(patch) + "\nto:\n" +
		`Resource: "/v1, Resource=services", GroupVersionKind: "/v1, Kind=Service"` + "\n" +
		`Name: "plain", Namespace: "default"` + "\n" +
		`for: "plain.yaml": error when patching "plain.yaml": Operation cannot be fulfilled on services "plain": the object has been modified; please apply your changes to the latest version and try again`
	if err == nil || err.Error() != want {
		t.Fatalf("got\n%v\nwant\n%s", err, want)
	}
	t.Logf("%v", err)
}

// TestApplyPatchOfACustomResourceIsAMergePatch: a CRD's object (no Go types) gets
// kubectl's three-way JSON merge patch, the written version in it.
func TestApplyPatchOfACustomResourceIsAMergePatch(t *testing.T) {
	t.Parallel()
	current := `{"apiVersion":"networking.istio.io/v1","kind":"VirtualService","metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"apiVersion\":\"networking.istio.io/v1\",\"kind\":\"VirtualService\",\"metadata\":{\"annotations\":{},\"name\":\"r\",\"namespace\":\"default\"},\"spec\":{\"hosts\":[\"a\"]}}\n"},"generation":2,"name":"r","namespace":"default","resourceVersion":"9"},"spec":{"hosts":["a","b"]}}`
	saved := `{"apiVersion":"networking.istio.io/v1","kind":"VirtualService","metadata":{"name":"r","resourceVersion":"4"},"spec":{"hosts":["c"]}}`
	modified, err := WithApplyRecord([]byte(saved), "default", true)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := ApplyPatch(modified, []byte(current))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(patch), `"resourceVersion":"4"`) || !strings.Contains(string(patch), `"hosts":["c"]`) || strings.Contains(string(patch), "$setElementOrder") {
		t.Fatalf("patch %s: want a merge patch with the version and the hosts", patch)
	}
	if !strings.Contains(string(modified), `\"namespace\":\"default\"`) {
		t.Fatalf("the record names no namespace: %s", modified)
	}
}
