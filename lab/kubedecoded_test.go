package lab

import (
	"testing"

	"github.com/meshlab/meshlab/controlplane/config"
)

// TestDecodedWorkloadsFollowTheStore: a render's copy is its own, a replaced Deployment
// is decoded again, and a deleted one is forgotten.
func TestDecodedWorkloadsFollowTheStore(t *testing.T) {
	t.Parallel()
	const v1 = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: docker.io/kennethreitz/httpbin}]}
`
	sc, err := config.Load("web.yaml", []byte(v1))
	if err != nil {
		t.Fatal(err)
	}
	var c decodedWorkloads
	first := c.deployments(sc.Objects)
	if len(first) != 1 {
		t.Fatalf("decoded %d Deployments, want 1", len(first))
	}
	for _, d := range first {
		d.Labels = map[string]string{"changed": "by-a-render"}
		*d.Spec.Replicas = 9
	}
	for _, d := range c.deployments(sc.Objects) {
		if d.Labels != nil || *d.Spec.Replicas != 2 {
			t.Fatalf("a render's change reached the next: labels %v, replicas %d", d.Labels, *d.Spec.Replicas)
		}
	}
	next, _, err := sc.Apply(config.File{Name: "web.yaml", Data: []byte(`
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: docker.io/kennethreitz/httpbin}]}
`)})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range c.deployments(next.Objects) {
		if *d.Spec.Replicas != 3 {
			t.Fatalf("replaced Deployment renders replicas %d, want 3", *d.Spec.Replicas)
		}
	}
	if len(c.m) != 1 {
		t.Fatalf("cache holds %d objects after the replace, want 1 (the old revision forgotten)", len(c.m))
	}
	gone, _, err := next.Delete(config.Ref{Kind: "Deployment", Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.deployments(gone.Objects); len(got) != 0 || len(c.m) != 0 {
		t.Fatalf("after delete: %d rendered, %d kept", len(got), len(c.m))
	}
}
