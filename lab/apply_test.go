package lab

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/discovery"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/scenarios"
)

// applyLab returns a Lab with the hello scenario's model and a running discovery server,
// without namespaces or processes: enough for Apply, Delete, Objects and ProxyStatus.
func applyLab(t *testing.T) *Lab {
	t.Helper()
	data, file, err := scenarios.Lookup("hello")
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Name: "t", ScenarioFile: file, ScenarioData: data, Logger: testutil.Logger(t)}
	m, err := prepare(&o)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	disc, err := discovery.New(discovery.Options{Logger: o.Logger, SocketPath: filepath.Join(t.TempDir(), "xds.sock"), SocketGID: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = disc.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("discovery server did not stop")
		}
	})
	if err := disc.Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	return &Lab{opts: o, log: o.Logger, disc: disc, model: m, names: newNameTables(m), kubeDNS: newKubeDNS(m, o.Logger)}
}

const (
	testDR = `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: backend}
spec:
  host: backend
  subsets: [{name: v1, labels: {version: v1}}, {name: v2, labels: {version: v2}}]
`
	testVS = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: backend}
spec:
  hosts: [backend]
  http: [{route: [{destination: {host: backend, subset: v1}, weight: 90}, {destination: {host: backend, subset: v2}, weight: 10}]}]
`
)

func TestLabApplyIsAtomic(t *testing.T) {
	t.Parallel()
	l := applyLab(t)
	ctx := context.Background()
	before := l.model
	// The VirtualService is valid, its DestinationRule in the same call is not: nothing
	// changes.
	badDR := strings.Replace(testDR, "ROUND", "", 1) + "  trafficPolicy: {loadBalancer: {simple: PASSTHROUGH}}\n"
	_, err := l.Apply(ctx, []api.ConfigFile{{Name: "vs.yaml", Data: testVS}, {Name: "dr.yaml", Data: badDR}})
	var ce *api.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "dr.yaml: DestinationRule default/backend: spec.trafficPolicy.loadBalancer.simple: PASSTHROUGH is not supported") {
		t.Fatalf("Apply with a bad DestinationRule: err = %v, want a ConfigError naming file, object and field", err)
	}
	if l.model != before {
		t.Fatal("a failed apply changed the model")
	}
	if objs, _ := l.Objects("vs", "", ""); len(objs) != 0 {
		t.Fatalf("a failed apply left objects: %v", objs)
	}
	changes, err := l.Apply(ctx, []api.ConfigFile{{Name: "dr.yaml", Data: testDR}, {Name: "vs.yaml", Data: testVS}})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if want := []api.Change{
		{Kind: "DestinationRule", Namespace: "default", Name: "backend", Action: api.ActionCreated},
		{Kind: "VirtualService", Namespace: "default", Name: "backend", Action: api.ActionCreated},
	}; !slices.Equal(changes, want) {
		t.Errorf("changes = %+v, want %+v", changes, want)
	}
	if len(l.model.Istio.VirtualServices) != 1 || l.model.Istio.VirtualServices[0].Spec.Hosts[0] != "backend.default.svc.cluster.local" {
		t.Errorf("model Istio after apply = %+v", l.model.Istio)
	}
	if l.model.Pod("backend-v1").IP != before.Pod("backend-v1").IP {
		t.Error("pod IPs moved")
	}
	objs, err := l.Objects("virtualservice", "default", "backend")
	if err != nil || len(objs) != 1 || objs[0].File != "vs.yaml" || !strings.Contains(string(objs[0].Object), `"weight":90`) {
		t.Errorf("Objects = %+v, %v", objs, err)
	}
	if all, _ := l.Objects("all", "", ""); len(all) != 7 {
		t.Errorf("Objects(all) = %d objects, want 7", len(all))
	}
	if _, err := l.Objects("frobnicator", "", ""); !errors.As(err, &ce) {
		t.Errorf("Objects of an unknown kind: err = %v, want a ConfigError", err)
	}
	// Re-applying changes nothing and pushes nothing.
	applied := l.model
	if changes, err := l.Apply(ctx, []api.ConfigFile{{Name: "vs.yaml", Data: testVS}}); err != nil || changes[0].String() != "VirtualService default/backend unchanged" || l.model != applied {
		t.Errorf("re-Apply: %v, %v", changes, err)
	}
	// A pod named as the lab's own namespaces is refused before anything changes.
	reserved := "apiVersion: meshlab.dev/v1alpha1\nkind: Workload\nmetadata: {name: world}\nspec: {labels: {app: backend, version: v3}, ports: [8080]}\n"
	if _, err := l.Apply(ctx, []api.ConfigFile{{Name: "w.yaml", Data: reserved}}); !errors.As(err, &ce) ||
		!strings.Contains(err.Error(), `w.yaml: Workload default/world: metadata.name: pod name "world" is reserved for the lab's own namespace ml-t-world`) {
		t.Errorf("Apply adding a pod named world: err = %v", err)
	}
	if l.model != applied {
		t.Fatal("a refused apply changed the model")
	}
	// Relabelling a pod is fine: it only moves endpoints.
	relabel := "apiVersion: meshlab.dev/v1alpha1\nkind: Workload\nmetadata: {name: backend-v2}\nspec: {labels: {app: backend, version: v2, track: canary}, serviceAccount: backend, ports: [8080], app: {}}\n"
	if _, err := l.Apply(ctx, []api.ConfigFile{{Name: "w.yaml", Data: relabel}}); err != nil {
		t.Errorf("Apply relabelling a pod: %v", err)
	}
	// Deleting what does not exist is refused (deleting the DestinationRule a route's
	// subsets come from is accepted, as in Istio); both objects together go.
	if _, err := l.Delete(ctx, nil, []api.ObjectRef{{Kind: "dr", Name: "nope"}}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("Delete of a missing DestinationRule: err = %v", err)
	}
	changes, err = l.Delete(ctx, []api.ConfigFile{{Name: "x.yaml", Data: testVS + "---\n" + testDR}}, nil)
	if err != nil || len(changes) != 2 || len(l.model.Istio.VirtualServices) != 0 {
		t.Errorf("Delete: %v, %v", changes, err)
	}
	if ps := l.ProxyStatus(); len(ps) != 3 || ps[0].Pod == "" {
		t.Errorf("ProxyStatus = %+v, want the 3 pods by name", ps)
	}
}
