package main

import (
	"reflect"
	"testing"
)

func TestMeshEditPaths(t *testing.T) {
	t.Parallel()
	before := map[string]any{"accessLogFile": "/dev/stdout", "outboundTrafficPolicy": map[string]any{"mode": "ALLOW_ANY"}, "defaultProviders": map[string]any{"metrics": []any{"prometheus"}}}
	after := map[string]any{"outboundTrafficPolicy": map[string]any{"mode": "REGISTRY_ONLY"}, "defaultProviders": map[string]any{"metrics": []any{"prometheus"}},
		"extensionProviders": []any{map[string]any{"name": "ext-authz"}}}
	got := changedPaths(before, after)
	want := []string{"accessLogFile", "extensionProviders", "outboundTrafficPolicy.mode"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("changedPaths = %q, want %q", got, want)
	}
	spec := map[string]any{"accessLogFile": "/dev/stdout", "rootNamespace": "istio-system"}
	after["trustDomainAliases"] = []any{"old-td"}
	defer delete(after, "trustDomainAliases")
	for _, p := range []string{"accessLogFile", "outboundTrafficPolicy.mode", "trustDomainAliases"} {
		v, ok := valueAt(after, p)
		setPath(spec, p, v, ok)
	}
	wantSpec := map[string]any{"rootNamespace": "istio-system", "outboundTrafficPolicy": map[string]any{"mode": "REGISTRY_ONLY"}, "trustDomainAliases": []any{"old-td"}}
	if !reflect.DeepEqual(spec, wantSpec) {
		t.Fatalf("spec = %v, want %v", spec, wantSpec)
	}
}
