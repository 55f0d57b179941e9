package config

import (
	"strings"
	"testing"

	networking "istio.io/api/networking/v1alpha3"
)

const myHTTPBin = `kind: Service
apiVersion: v1
metadata:
  name: my-httpbin
spec:
  type: ExternalName
  externalName: httpbin.org
  ports:
  - name: http
    protocol: TCP
    port: 80
`

// The egress-kubernetes-services task's ExternalName Service: no model Service (no VIP,
// no pods), an alias to httpbin.org, and the ServiceEntry istiod's registry makes of it
// (its FQDN, DNS resolution with httpbin.org as the endpoint, MESH_INTERNAL), which a
// DestinationRule names by that FQDN.
func TestExternalNameService(t *testing.T) {
	t.Parallel()
	m := buildModel(t, myHTTPBin+"---\n"+`apiVersion: networking.istio.io/v1alpha3
kind: DestinationRule
metadata:
  name: my-httpbin
spec:
  host: my-httpbin.default.svc.cluster.local
  trafficPolicy:
    tls:
      mode: DISABLE
`)
	for _, s := range m.Services {
		if s.Name == "my-httpbin" {
			t.Errorf("an ExternalName Service became a model Service with VIP %v", s.VIP)
		}
	}
	if len(m.ExternalNames) != 1 || m.ExternalNames[0].Target != "httpbin.org" || len(m.ExternalNames[0].Ports) != 1 {
		t.Fatalf("ExternalNames = %+v, want my-httpbin -> httpbin.org on 80", m.ExternalNames)
	}
	if got := m.Aliases("default")["my-httpbin"]; got != "httpbin.org" {
		t.Errorf("alias my-httpbin in default -> %q", got)
	}
	if _, ok := m.Aliases("other")["my-httpbin"]; ok {
		t.Error("the bare name is an alias outside the Service's namespace")
	}
	var found bool
	for _, se := range m.Istio.ServiceEntries {
		if len(se.Spec.GetHosts()) == 1 && se.Spec.GetHosts()[0] == "my-httpbin.default.svc.cluster.local" {
			found = true
			if se.Spec.GetResolution() != networking.ServiceEntry_DNS || se.Spec.GetLocation() != networking.ServiceEntry_MESH_INTERNAL ||
				len(se.Spec.GetEndpoints()) != 1 || se.Spec.GetEndpoints()[0].GetAddress() != "httpbin.org" ||
				len(se.Spec.GetPorts()) != 1 || se.Spec.GetPorts()[0].GetProtocol() != "HTTP" {
				t.Errorf("the ExternalName's ServiceEntry: %v", se.Spec)
			}
		}
	}
	if !found {
		t.Error("no ServiceEntry for my-httpbin.default.svc.cluster.local")
	}
	if len(m.Istio.DestinationRules) != 1 || m.Istio.DestinationRules[0].Spec.GetHost() != "my-httpbin.default.svc.cluster.local" {
		t.Errorf("the DestinationRule's host: %v", m.Istio.DestinationRules)
	}
}

func TestExternalNameRefusals(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		strings.Replace(myHTTPBin, "externalName: httpbin.org", "externalName: HTTPBIN.org", 1):               `spec.externalName: "HTTPBIN.org" is not a lowercase RFC 1123 DNS name`,
		strings.Replace(myHTTPBin, "externalName: httpbin.org", "externalName: \"\"", 1):                      "spec.externalName: is required with type ExternalName",
		strings.Replace(myHTTPBin, "externalName: httpbin.org", "externalName: a\n  clusterIP: 10.96.0.9", 1): "spec.clusterIP: must be empty with type ExternalName",
	} {
		_, err := Load("t.yaml", []byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("load:\n%s\nerror %v, want %q", in, err, want)
		}
	}
}
