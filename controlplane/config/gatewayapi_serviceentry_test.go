package config

import (
	"slices"
	"testing"
)

// The wildcard egress task's Gateway API objects: a TLSRoute whose parent is the
// ServiceEntry wikipedia becomes a mesh VirtualService of the entry's hosts, matching
// their SNI, to the gateway's Service; one whose backend is Istio's Hostname
// www.wikipedia.org routes the gateway's listener to that host as written.
func TestTLSRouteServiceEntryParentAndHostnameBackend(t *testing.T) {
	t.Parallel()
	m := buildModel(t, `apiVersion: gateway.networking.k8s.io/v1beta1
kind: Gateway
metadata:
  name: wikipedia-egress-gateway
  annotations:
    networking.istio.io/service-type: ClusterIP
spec:
  gatewayClassName: istio
  listeners:
  - name: tls
    hostname: "*.wikipedia.org"
    port: 443
    protocol: TLS
    tls:
      mode: Passthrough
    allowedRoutes:
      namespaces:
        from: Same
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TLSRoute
metadata:
  name: direct-wikipedia-to-egress-gateway
spec:
  parentRefs:
  - kind: ServiceEntry
    group: networking.istio.io
    name: wikipedia
  rules:
  - backendRefs:
    - name: wikipedia-egress-gateway-istio
      port: 443
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TLSRoute
metadata:
  name: forward-wikipedia-from-egress-gateway
spec:
  parentRefs:
  - name: wikipedia-egress-gateway
  hostnames:
  - "*.wikipedia.org"
  rules:
  - backendRefs:
    - kind: Hostname
      group: networking.istio.io
      name: www.wikipedia.org
      port: 443
---
apiVersion: networking.istio.io/v1alpha3
kind: ServiceEntry
metadata:
  name: wikipedia
spec:
  hosts:
  - "*.wikipedia.org"
  ports:
  - number: 443
    name: https
    protocol: HTTPS
`)
	var mesh, gw bool
	for _, vs := range m.Istio.VirtualServices {
		spec := vs.Spec
		if len(spec.GetTls()) != 1 || len(spec.GetTls()[0].GetRoute()) != 1 {
			continue
		}
		dest := spec.GetTls()[0].GetRoute()[0].GetDestination()
		switch {
		case slices.Equal(spec.GetGateways(), []string{"mesh"}):
			mesh = true
			if !slices.Equal(spec.GetHosts(), []string{"*.wikipedia.org"}) || !slices.Equal(spec.GetTls()[0].GetMatch()[0].GetSniHosts(), []string{"*.wikipedia.org"}) ||
				dest.GetHost() != "wikipedia-egress-gateway-istio.default.svc.cluster.local" || dest.GetPort().GetNumber() != 443 {
				t.Errorf("the ServiceEntry parent's VirtualService: %v", spec)
			}
		default:
			gw = true
			if dest.GetHost() != "www.wikipedia.org" || dest.GetPort().GetNumber() != 443 {
				t.Errorf("the Hostname backend's destination: %v", dest)
			}
		}
	}
	if !mesh || !gw {
		t.Errorf("VirtualServices %v: want one for the mesh (ServiceEntry parent) and one for the gateway", m.Istio.VirtualServices)
	}
}
