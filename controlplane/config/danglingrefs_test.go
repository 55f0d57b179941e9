package config

import (
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestRouteBeforeItsServices applies Istio's bookinfo-gateway.yaml (Gateway API) before
// bookinfo.yaml, as Kubernetes takes them in any order: the HTTPRoute is stored, its
// ResolvedRefs is False (BackendNotFound, istiod's message) while productpage's Service
// is missing and its route still names the backend (istiod keeps the destination: its
// cluster does not exist yet), then True once the Service is applied.
func TestRouteBeforeItsServices(t *testing.T) {
	t.Parallel()
	dir := testutil.IstioSamples(t)
	read := func(p ...string) File {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(append([]string{dir}, p...)...))
		if err != nil {
			t.Fatal(err)
		}
		return File{Name: p[len(p)-1], Data: data}
	}
	sc, err := Load("base.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	sc, _, err = sc.Apply(read("bookinfo", "gateway-api", "bookinfo-gateway.yaml"))
	if err != nil {
		t.Fatalf("apply bookinfo-gateway.yaml before bookinfo.yaml: %v", err)
	}
	resolved := func(sc *Scenario) metav1.Condition {
		t.Helper()
		for _, o := range sc.Objects {
			if o.HTTPRoute != nil && o.Origin.Name == "bookinfo" {
				st := RouteStatus(sc.Objects, o)
				if len(st.Parents) != 1 {
					t.Fatalf("%d parents in status, want 1", len(st.Parents))
				}
				for _, c := range st.Parents[0].Conditions {
					if c.Type == "ResolvedRefs" {
						return c
					}
				}
			}
		}
		t.Fatal("no HTTPRoute bookinfo with a ResolvedRefs condition")
		return metav1.Condition{}
	}
	if c := resolved(sc); c.Status != metav1.ConditionFalse || c.Reason != "BackendNotFound" || c.Message != "backend(productpage.default.svc.cluster.local) not found" {
		t.Errorf("without productpage's Service: ResolvedRefs %s %s %q", c.Status, c.Reason, c.Message)
	}
	if _, err := sc.Build(defaultOpts); err != nil {
		t.Fatalf("build with the route's backend missing: %v", err)
	}
	var routed bool
	for _, o := range gatewayAPIIstio(sc.Objects) {
		for _, h := range o.VirtualService.GetHttp() {
			for _, d := range h.GetRoute() {
				routed = routed || d.GetDestination().GetHost() == "productpage.default.svc.cluster.local" && d.GetDestination().GetPort().GetNumber() == 9080
			}
		}
	}
	if !routed {
		t.Error("the gateway's VirtualService lost the missing backend: istiod keeps its destination")
	}
	sc, _, err = sc.Apply(read("bookinfo", "platform", "kube", "bookinfo.yaml"))
	if err != nil {
		t.Fatalf("apply bookinfo.yaml after: %v", err)
	}
	if c := resolved(sc); c.Status != metav1.ConditionTrue || c.Reason != "ResolvedRefs" {
		t.Errorf("with productpage's Service: ResolvedRefs %s %s %q", c.Status, c.Reason, c.Message)
	}
}

// TestRouteOfAMissingServiceParent stores a GAMMA route whose Service parent does not
// exist, as Kubernetes does: istiod binds it nowhere (no mesh VirtualService) and its
// status says Accepted False, NoMatchingParent.
func TestRouteOfAMissingServiceParent(t *testing.T) {
	t.Parallel()
	sc, err := Load("gw.yaml", []byte(docs(httpbinManifest, `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r}
spec: {parentRefs: [{kind: Service, group: "", name: nope}], rules: [{backendRefs: [{name: httpbin, port: 8000}]}]}
`)))
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	for _, o := range gatewayAPIIstio(sc.Objects) {
		if o.VirtualService != nil {
			t.Errorf("VirtualService %s made for a parent that does not exist", o.Origin)
		}
	}
	for _, o := range sc.Objects {
		if o.HTTPRoute == nil {
			continue
		}
		c := RouteStatus(sc.Objects, o).Parents[0].Conditions[0]
		if c.Type != "Accepted" || c.Status != metav1.ConditionFalse || c.Reason != "NoMatchingParent" || c.Message != `parent service: "nope" not found` {
			t.Errorf("status %+v, want Accepted False NoMatchingParent", c)
		}
	}
}
