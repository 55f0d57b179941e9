package e2e

import (
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestDocsInstalledState reads the installed-state IstioOperator as Istio's pages read it
// (`kubectl get istiooperator installed-state -n istio-system -o jsonpath=...`, the egress
// pages' check of outboundTrafficPolicy and the install page's `-o yaml`) after `install`
// as istioctl up to 1.23 wrote it: nothing for the mode after the demo profile (the pages'
// "the output should be empty"), REGISTRY_ONLY once installed with it, and kubectl's
// NotFound after `uninstall --purge`. The demo profile's gateways exist from the install
// on, as on a cluster (Services with istioctl's ports, a pod each), and go with
// `uninstall --purge`.
func TestDocsInstalledState(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	d := startDocsLab(t)
	mode := []string{"get", "istiooperator", "installed-state", "-n", "istio-system", "-o", "jsonpath={.spec.meshConfig.outboundTrafficPolicy.mode}"}

	d.run("install", "--set", "profile=demo", "-y")
	d.says("", "", mode...)
	d.says("15021 80 443 31400 15443", "", "-n", "istio-system", "get", "service", "istio-ingressgateway", "-o", "jsonpath={.spec.ports[*].port}")
	d.says("80 443", "", "-n", "istio-system", "get", "service", "istio-egressgateway", "-o", "jsonpath={.spec.ports[*].port}")
	d.until("the install's gateway pods Running", func() string {
		out, _ := meshlab(t, "--lab", d.name, "get", "pods", "-n", "istio-system", "-l", "app in (istio-ingressgateway,istio-egressgateway)", "-o", "jsonpath={.items[*].status.phase}")
		return out
	}, func(out string) bool { return out == "Running Running" })
	if out := d.kubectl("", "-n", "istio-system", "get", "IstioOperator", "installed-state", "-o", "yaml"); !strings.Contains(out, "kind: IstioOperator\n") ||
		!strings.Contains(out, "  name: installed-state\n") || !strings.Contains(out, "  profile: demo\n") {
		t.Errorf("get IstioOperator installed-state -o yaml:\n%s\nwant the demo profile's IstioOperator", out)
	}
	d.run("install", "--set", "profile=demo", "--set", "meshConfig.outboundTrafficPolicy.mode=REGISTRY_ONLY", "-y")
	d.says("REGISTRY_ONLY", "", mode...)
	d.run("uninstall", "-y", "--purge")
	if out, err := meshlab(t, append([]string{"--lab", d.name}, mode...)...); err == nil || !strings.Contains(out, `Error from server (NotFound): istiooperators.install.istio.io "installed-state" not found`) {
		t.Errorf("get istiooperator installed-state after uninstall --purge: %v\n%s\nwant kubectl's NotFound", err, out)
	}
	if out, err := meshlab(t, "--lab", d.name, "get", "service", "istio-ingressgateway", "-n", "istio-system"); err == nil || !strings.Contains(out, "NotFound") {
		t.Errorf("get service istio-ingressgateway after uninstall --purge: %v\n%s\nwant kubectl's NotFound", err, out)
	}
}
