package analyze

import (
	"strings"
	"testing"

	"github.com/meshlab/meshlab/controlplane/config"
)

// TestAmbientFindings checks each ambient finding on the object it is about, and that
// what is right draws none.
func TestAmbientFindings(t *testing.T) {
	t.Parallel()
	fs := Analyze([]config.File{readFile(t, "ambient-labels.yaml"), readFile(t, "ambient-policy.yaml"), {Name: "custom.yaml", Data: []byte(`
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: ext-authz, namespace: bookinfo}
spec:
  selector: {matchLabels: {app: productpage}}
  action: CUSTOM
  provider: {name: ext}
  rules: [{to: [{operation: {paths: [/admin]}}]}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: deny-path-headers
  namespace: bookinfo
  annotations: {istio.io/dry-run: "true"}
spec:
  selector: {matchLabels: {app: productpage}}
  action: DENY
  rules: [{from: [{source: {namespaces: [qa]}}]}]
`)}})
	has := func(code, object string) bool {
		for _, f := range fs {
			if f.Code == code && f.Object.String() == object {
				return true
			}
		}
		return false
	}
	for _, want := range []struct{ code, object string }{
		{CodeNamespaceMultipleInjectionLabels, "Namespace both"},
		{CodeDataplaneModeInvalid, "Namespace typo"},
		{CodeDataplaneModeInvalid, "Pod amb/maybe"},
		{CodeInjectedAndAmbient, "Deployment default/curl"},
		{CodeInjectedAndAmbient, "Pod amb/both-ways"},
		{CodeZtunnelPartialPolicy, "AuthorizationPolicy bookinfo/productpage-get"},
		{CodeZtunnelPartialPolicy, "AuthorizationPolicy istio-system/no-debug"},
		{CodeNegativeConditionStatus, "AuthorizationPolicy bookinfo/ext-authz"},
		{CodeNegativeConditionStatus, "AuthorizationPolicy bookinfo/deny-path-headers"},
	} {
		if !has(want.code, want.object) {
			t.Errorf("no %s on %s", want.code, want.object)
		}
	}
	for _, f := range fs {
		switch {
		case f.Object.String() == "Namespace amb", f.Object.String() == "Pod amb/out" && f.Code != CodeWorkloadInNoService,
			f.Object.String() == "AuthorizationPolicy bookinfo/productpage-ztunnel",
			f.Object.String() == "AuthorizationPolicy bookinfo/productpage-viewer" && f.Code != CodeSchemaValidationError:
			t.Errorf("unexpected finding %s", f)
		}
		if f.Object.String() == "AuthorizationPolicy bookinfo/deny-path-headers" && !strings.Contains(f.Message,
			`reason=UnsupportedValue, message=found policy "bookinfo/deny-path-headers" using dry-run annotation, but support for ambient dry-run authorizationPolicies isn't enabled.`) {
			t.Errorf("dry-run finding: %s", f)
		}
		if f.Code == CodeZtunnelPartialPolicy && !strings.Contains(f.Message, "productpage-v1") {
			t.Errorf("%s does not name the ambient pods", f)
		}
	}
}

// TestAmbientPolicyOnlyForAmbientPods: the same L7 ALLOW on sidecar pods draws nothing.
func TestAmbientPolicyOnlyForAmbientPods(t *testing.T) {
	t.Parallel()
	fs := Analyze([]config.File{readFile(t, "base.yaml"), {Name: "p.yaml", Data: []byte(`
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: get-only}
spec:
  selector: {matchLabels: {app: backend}}
  rules: [{to: [{operation: {methods: [GET]}}]}]
`)}})
	for _, f := range fs {
		if f.Code == CodeZtunnelPartialPolicy {
			t.Errorf("finding on a sidecar pod's policy: %s", f)
		}
	}
}
