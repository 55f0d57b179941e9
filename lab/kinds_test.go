package lab

import (
	"testing"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/config"
)

// TestKindsAreConfigs holds the lab's discovery (GET /v1/kinds, what the CLI resolves a
// typed kind against) to controlplane/config's kind table, and the API contract's
// constants to config's.
func TestKindsAreConfigs(t *testing.T) {
	t.Parallel()
	ks := labKinds()
	if got, want := ks.KindNames(), config.Kinds(); len(got) != len(want) {
		t.Fatalf("kinds %v, want config's %v", got, want)
	}
	for _, k := range ks {
		if len(k.Names) == 0 {
			t.Errorf("%s: no spellings", k.Kind)
		}
		for _, n := range k.Names {
			if c, ok := config.CanonicalKind(n); !ok || c != k.Kind {
				t.Errorf("%s lists %q, which config reads as %q (%v)", k.Kind, n, c, ok)
			}
			if got, ok := ks.Lookup(n); !ok || got.Kind != k.Kind {
				t.Errorf("Lookup(%q) = %q, %v; want %s", n, got.Kind, ok, k.Kind)
			}
		}
	}
	for spelling, want := range map[string]string{
		"vs": "virtualservice.networking.istio.io", "gw": "gateway.networking.istio.io",
		"gtw": "gateway.gateway.networking.k8s.io", "deploy": "deployment.apps", "svc": "service",
		"AuthorizationPolicy": "authorizationpolicy.security.istio.io", "workload": "workload.meshlab.dev",
	} {
		k, ok := ks.Lookup(spelling)
		if got := k.Resource(false); !ok || got != want {
			t.Errorf("%s: resource %q (%v), want %q", spelling, got, ok, want)
		}
	}
	if _, ok := ks.Lookup("pods"); ok {
		t.Error("pods are not a config kind: the lab lists them apart")
	}
	if api.GatewayAPIGatewayKind != config.GatewayAPIGatewayKind {
		t.Errorf("api.GatewayAPIGatewayKind %q, config's %q", api.GatewayAPIGatewayKind, config.GatewayAPIGatewayKind)
	}
	if api.MaxFileBytes != config.MaxFileBytes {
		t.Errorf("api.MaxFileBytes %d, config.MaxFileBytes %d: a client would send files the lab refuses, or refuse files it reads", api.MaxFileBytes, config.MaxFileBytes)
	}
}
