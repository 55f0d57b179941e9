package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestTLSRouteConversion converts TLSRoutes as istiod's convertTLSRoute into the golden
// Istio config: a Gateway parent's TLS Passthrough listener as a PASSTHROUGH server and
// the route as a VirtualService tls route by SNI (its hostnames), weights as a
// TCPRoute's; a Service parent (GAMMA) as a mesh VirtualService whose route without
// hostnames matches the Service's own name and the parent's port.
func TestTLSRouteConversion(t *testing.T) {
	t.Parallel()
	yaml := docs(echoServices, `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec: {gatewayClassName: istio, listeners: [{name: tls, port: 443, protocol: TLS, hostname: "*.example.com", tls: {mode: Passthrough}}]}
`, `apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TLSRoute
metadata: {name: split}
spec:
  parentRefs: [{name: gw}]
  hostnames: [a.example.com, b.example.com]
  rules: [{backendRefs: [{name: echo-v1, port: 9000, weight: 80}, {name: echo-v2, port: 9000, weight: 20}, {name: echo, port: 9000, weight: 0}]}]
`, `apiVersion: gateway.networking.k8s.io/v1alpha3
kind: TLSRoute
metadata: {name: mesh}
spec:
  parentRefs: [{group: "", kind: Service, name: echo, port: 9000}]
  rules: [{backendRefs: [{name: echo-v2, port: 9000}]}]
`)
	s, err := Load("tls.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	testutil.Golden(t, "tlsroute", []byte(renderDerived(t, gatewayAPIIstio(s.Objects))))
}

// TestTLSRouteRefused refuses what meshlab does not read, by name.
func TestTLSRouteRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ yaml, want string }{
		{`apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {name: r}
spec: {parentRefs: [{name: gw}], rules: [{backendRefs: [{name: echo, port: 9000, filters: []}]}]}
`, "spec.rules[0].backendRefs[0].filters"},
		{`apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {name: r}
spec: {parentRefs: [{name: gw}], rules: []}
`, "spec.rules: at least one rule is required"},
		{`apiVersion: gateway.networking.k8s.io/v1beta1
kind: TLSRoute
metadata: {name: r}
spec: {parentRefs: [{name: gw}], rules: [{backendRefs: [{name: echo, port: 9000}]}]}
`, "version v1beta1 of TLSRoute is not one meshlab reads (v1, v1alpha2, v1alpha3)"},
		{`apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: g}
spec: {gatewayClassName: istio, listeners: [{name: tls, port: 443, protocol: TLS, tls: {mode: Passthrough, certificateRefs: [{name: c}]}}]}
`, "spec.listeners[0].tls.certificateRefs: are not read with mode Passthrough"},
	} {
		_, err := Load("tls.yaml", []byte(docs(echoServices, tc.yaml)))
		var el ErrorList
		if !errors.As(err, &el) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("load:\n%s\nerror %v\nwant one with %q", tc.yaml, err, tc.want)
		}
	}
}
