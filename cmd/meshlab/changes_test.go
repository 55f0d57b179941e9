package main

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/meshlab/meshlab/api"
)

func TestPrintChanges(t *testing.T) {
	t.Parallel()
	changes := []api.Change{
		{Kind: "VirtualService", Namespace: "default", Name: "reviews", Action: api.ActionConfigured},
		{Kind: "Service", Namespace: "default", Name: "backend", Action: api.ActionUnchanged},
		{Kind: "Deployment", Namespace: "default", Name: "details-v1", Action: api.ActionCreated},
		{Kind: api.GatewayAPIGatewayKind, Namespace: "default", Name: "bookinfo-gateway", Action: api.ActionCreated},
		{Kind: "Service", Namespace: "default", Name: "details", Action: api.ActionDeleted},
		{Kind: api.PodKind, Namespace: "default", Name: "backend-v2-0", Action: api.ActionCreated},
		{Kind: api.PodKind, Namespace: "default", Name: "backend-v1-0", Action: api.ActionDeleted, Error: "kill agent: no such process"},
		{Kind: api.PodKind, Namespace: "default", Name: "backend-v3-0", Action: api.ActionFailed, Error: "not ready after 30s (meshlab describe pod backend-v3-0)"},
		{Kind: "ClusterRole", Namespace: "default", Name: "prometheus", Action: api.ActionSkipped, Reason: "RBAC: a lab has no API clients to authorize"},
		{Kind: "EndpointSlice", Namespace: "shop", Name: "cart-x7", Action: api.ActionSkipped, Reason: "the lab derives endpoints from its pods and Services"},
	}
	var text, notes bytes.Buffer
	kinds := api.Kinds{
		{Kind: "Deployment", Group: "apps", Names: []string{"deployment", "deployments", "deploy"}},
		{Kind: api.GatewayAPIGatewayKind, Group: "gateway.networking.k8s.io", Names: []string{"gateway"}},
		{Kind: "Service", Names: []string{"service", "svc"}},
		{Kind: "VirtualService", Group: "networking.istio.io", Names: []string{"virtualservice", "vs"}},
	}
	if err := printChanges(&text, &notes, "", changes, kinds); err != nil {
		t.Fatal(err)
	}
	want := "virtualservice.networking.istio.io/reviews configured\n" +
		"service/backend unchanged\n" +
		"deployment.apps/details-v1 created\n" +
		"gateway.gateway.networking.k8s.io/bookinfo-gateway created\n" +
		"service \"details\" deleted\n" +
		"clusterrole.rbac.authorization.k8s.io/prometheus created\n" +
		"endpointslice/cart-x7 skipped\n"
	if text.String() != want {
		t.Errorf("text:\n%s\nwant:\n%s", text.String(), want)
	}
	// What kubectl does not print goes to stderr: the pods, and why a kind is not kept.
	wantNotes := "pod default/backend-v2-0 created\n" +
		"pod default/backend-v1-0 deleted with errors: kill agent: no such process\n" +
		"pod default/backend-v3-0 FAILED: not ready after 30s (meshlab describe pod backend-v3-0)\n" +
		"Warning: clusterrole.rbac.authorization.k8s.io/prometheus is not kept by the lab: RBAC: a lab has no API clients to authorize\n" +
		"Warning: endpointslice/cart-x7 is not kept by the lab: the lab derives endpoints from its pods and Services\n"
	if notes.String() != wantNotes {
		t.Errorf("stderr:\n%s\nwant:\n%s", notes.String(), wantNotes)
	}
	var js bytes.Buffer
	if err := printChanges(&js, &notes, "json", changes, kinds); err != nil {
		t.Fatal(err)
	}
	var got []api.Change
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatalf("json %q: %v", js.String(), err)
	}
	if !reflect.DeepEqual(got, changes) {
		t.Errorf("json = %+v, want %+v", got, changes)
	}
	js.Reset()
	if err := printChanges(&js, &notes, "json", nil, kinds); err != nil || js.String() != "[]\n" {
		t.Errorf("no change: %q, %v; want []", js.String(), err)
	}
}
