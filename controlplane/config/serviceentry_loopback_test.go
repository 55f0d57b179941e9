package config

import (
	"strings"
	"testing"
)

// TestServiceEntryLoopbackEndpoint: a STATIC ServiceEntry endpoint on the loopback is
// each proxy's own (secure-metrics' legacy gateway-admin, 127.0.0.1:15020) and is kept;
// an address that is neither a lab pod's nor a loopback one is refused by field.
func TestServiceEntryLoopbackEndpoint(t *testing.T) {
	t.Parallel()
	const se = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: gateway-admin, namespace: istio-system}
spec:
  hosts: [gateway-admin.local]
  location: MESH_INTERNAL
  ports:
  - {number: 15020, name: http-metrics, protocol: HTTP}
  resolution: STATIC
  endpoints:
  - address: %s
`
	sc, err := Load("se.yaml", []byte(strings.Replace(se, "%s", "127.0.0.1", 1)))
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	m, err := sc.Build(defaultOpts)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	if len(m.Istio.ServiceEntries) != 1 || m.Istio.ServiceEntries[0].Spec.GetEndpoints()[0].GetAddress() != "127.0.0.1" {
		t.Fatalf("ServiceEntries %v, want gateway-admin with its 127.0.0.1 endpoint", m.Istio.ServiceEntries)
	}
	sc, err = Load("se.yaml", []byte(strings.Replace(se, "%s", "192.0.2.7", 1)))
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if _, err := sc.Build(defaultOpts); err == nil || !strings.Contains(err.Error(), `spec.endpoints[0].address: "192.0.2.7" is not the IP of a lab pod (nor a loopback address, each proxy's own)`) {
		t.Errorf("build with 192.0.2.7: %v, want it refused by field", err)
	}
}
