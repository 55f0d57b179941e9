package config

import (
	"strings"
	"testing"
)

// A running lab takes a Service that selects no pod, as Kubernetes does: deleting a
// Deployment leaves its Service without endpoints, and a Service may be applied before
// its Deployment. Loading a lab file still refuses one, as a likely typo.
func TestRunningLabServiceWithoutPods(t *testing.T) {
	t.Parallel()
	s := keepScenario(t, []string{"httpbin", "curl"}, map[string]int{"httpbin": 1, "curl": 1})
	next, changes, err := s.Delete(Ref{Kind: "deploy", Name: "httpbin"})
	if err != nil {
		t.Fatalf("delete the Deployment behind a Service: %v", err)
	}
	if len(changes) != 1 || changes[0].String() != "Deployment default/httpbin deleted" {
		t.Errorf("changes = %v", changes)
	}
	m, err := next.Build(defaultOpts)
	if err != nil {
		t.Fatal(err)
	}
	for _, svc := range m.Services {
		if svc.Name == "httpbin" && len(m.Endpoints(svc, svc.Ports[0])) != 0 {
			t.Errorf("httpbin has endpoints after its Deployment went")
		}
	}
	svc := "apiVersion: v1\nkind: Service\nmetadata: {name: later}\nspec: {selector: {app: later}, ports: [{port: 80}]}\n"
	if _, _, err := s.Apply(File{Name: "svc.yaml", Data: []byte(svc)}); err != nil {
		t.Errorf("apply a Service before its pods: %v", err)
	}
	if _, err := Load("lab.yaml", []byte(svc)); err == nil || !strings.Contains(err.Error(), "lab.yaml: Service default/later: spec.selector: matches no Workload") {
		t.Errorf("load a lab file with a Service selecting nothing: %v", err)
	}
}
