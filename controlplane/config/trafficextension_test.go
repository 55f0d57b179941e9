package config

import (
	"strings"
	"testing"
)

// The Lua page's TrafficExtensions load into the model; what the lab does not build is
// refused by name: a Wasm filter, a selector, no targets, a GatewayClass target.
func TestLoadTrafficExtension(t *testing.T) {
	t.Parallel()
	const page = `apiVersion: extensions.istio.io/v1alpha1
kind: TrafficExtension
metadata:
  name: parity-for-reviews
spec:
  targetRefs:
    - kind: Service
      group: ""
      name: reviews
  match:
  - mode: SERVER
  phase: STATS
  lua:
    inlineCode: |
      function envoy_on_request(request_handle) end
`
	s, err := Load("t.yaml", []byte(page))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	m, err := s.Build(defaultOpts)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if len(m.Istio.TrafficExtensions) != 1 || m.Istio.TrafficExtensions[0].Name != "parity-for-reviews" || m.Istio.TrafficExtensions[0].Spec.GetLua().GetInlineCode() == "" {
		t.Fatalf("TrafficExtensions = %v", m.Istio.TrafficExtensions)
	}
	for _, tc := range []struct {
		name, spec string
		want       []string
	}{
		{name: "wasm", spec: "  targetRefs: [{kind: Gateway, group: gateway.networking.k8s.io, name: waypoint}]\n  wasm: {url: oci://ghcr.io/istio-ecosystem/wasm-extensions/basic_auth:1.12.0}\n",
			want: []string{"spec.wasm: is not supported by meshlab: its proxy has no Wasm runtime"}},
		{name: "selector", spec: "  selector: {matchLabels: {app: reviews}}\n  lua: {inlineCode: x}\n",
			want: []string{"spec.selector: is not supported by meshlab: TrafficExtensions on sidecars are not built"}},
		{name: "no targets", spec: "  lua: {inlineCode: x}\n",
			want: []string{"spec.targetRefs: is required by meshlab"}},
		{name: "no filter", spec: "  targetRefs: [{kind: Gateway, group: gateway.networking.k8s.io, name: waypoint}]\n",
			want: []string{"spec: one of lua or wasm is required"}},
		{name: "gatewayclass", spec: "  targetRefs: [{kind: GatewayClass, group: gateway.networking.k8s.io, name: istio-waypoint}]\n  lua: {inlineCode: x}\n",
			want: []string{"spec.targetRefs[0]: a GatewayClass target is not supported by meshlab for TrafficExtensions"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			doc := "apiVersion: extensions.istio.io/v1alpha1\nkind: TrafficExtension\nmetadata: {name: te}\nspec:\n" + tc.spec
			_, err := Load("te.yaml", []byte(doc))
			for _, want := range tc.want {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("Load = %v, want %q", err, want)
				}
			}
		})
	}
}

// A WasmPlugin (istio.io's extend-waypoint-wasm page) is refused with the reason and
// the kind to use instead.
func TestLoadWasmPluginRefused(t *testing.T) {
	t.Parallel()
	const doc = `apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {name: basic-auth-at-waypoint}
spec:
  targetRefs: [{kind: Gateway, group: gateway.networking.k8s.io, name: waypoint}]
  url: oci://ghcr.io/istio-ecosystem/wasm-extensions/basic_auth:1.12.0
  phase: AUTHN
`
	_, err := Load("wasm.yaml", []byte(doc))
	if want := "kind WasmPlugin is not supported by meshlab: its proxy has no Wasm runtime"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Load = %v, want %q", err, want)
	}
}
