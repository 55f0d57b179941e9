package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// TestInstalledStateAsIstioctl holds the installed-state IstioOperator install keeps to
// what istioctl wrote: the profile's components and values, the mesh config given over
// the profile's (the demo profile's access log; none written for the others, so the
// egress page's outboundTrafficPolicy query prints nothing until it is set).
func TestInstalledStateAsIstioctl(t *testing.T) {
	created := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	demo, err := readInstall([]string{"profile=demo"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	y, err := yaml.Marshal(installedState(demo, created))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"  name: installed-state\n  namespace: istio-system\n",
		"    egressGateways:\n    - enabled: true\n      name: istio-egressgateway\n",
		"  meshConfig:\n    accessLogFile: /dev/stdout\n  profile: demo\n",
	} {
		if !strings.Contains(string(y), want) {
			t.Errorf("installed-state of the demo profile:\n%s\nwant it to hold\n%s", y, want)
		}
	}
	def, err := readInstall([]string{"meshConfig.outboundTrafficPolicy.mode=REGISTRY_ONLY"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(installedState(def, created)["spec"])
	if err != nil {
		t.Fatal(err)
	}
	if want := `"meshConfig":{"outboundTrafficPolicy":{"mode":"REGISTRY_ONLY"}},"profile":"default"`; !strings.Contains(string(b), want) {
		t.Errorf("installed-state of the default profile with REGISTRY_ONLY:\n%s\nwant %s", b, want)
	}
	if strings.Contains(string(b), `"ztunnel":{"enabled":true}`) || !strings.Contains(string(b), `"ingressGateways":[{"enabled":true`) {
		t.Errorf("the default profile's components: %s", b)
	}
}

// TestIstioOperatorSpellings holds the spellings of IstioOperator get takes, as kubectl
// resolves them from the CRD.
func TestIstioOperatorSpellings(t *testing.T) {
	for _, k := range []string{"istiooperator", "IstioOperator", "iop", "istiooperators.install.istio.io"} {
		if !isIstioOperatorKind(k) {
			t.Errorf("%s is not taken for IstioOperator", k)
		}
	}
	if isIstioOperatorKind("gateway") {
		t.Error("gateway taken for IstioOperator")
	}
}
