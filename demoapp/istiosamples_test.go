package demoapp

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIstioModuleVersionIsFidelitys: the world's samples come from the Istio version
// fidelity/ pins.
func TestIstioModuleVersionIsFidelitys(t *testing.T) {
	mod, err := os.ReadFile(filepath.Join("..", "fidelity", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mod), "istio.io/istio "+IstioModuleVersion+"\n") {
		t.Errorf("fidelity/go.mod does not pin istio.io/istio %s", IstioModuleVersion)
	}
}

// TestIstioSampleFile: a raw.githubusercontent.com path below samples/ (any ref) is the
// module's file, served by the world's raw.githubusercontent.com; anything else is not.
func TestIstioSampleFile(t *testing.T) {
	if _, err := os.Stat(filepath.Join(IstioModuleDir(), "samples")); err != nil {
		t.Skipf("the Istio module is not in the module cache: %v", err)
	}
	local, ok := IstioSampleFile("/istio/istio/release-1.24/samples/bookinfo/platform/kube/bookinfo.yaml")
	if !ok || local != filepath.Join(IstioModuleDir(), "samples", "bookinfo", "platform", "kube", "bookinfo.yaml") {
		t.Fatalf("IstioSampleFile(bookinfo.yaml) = %q, %v", local, ok)
	}
	for _, p := range []string{
		"/istio/istio/master/samples/bookinfo/platform/kube",               // a directory
		"/istio/istio/master/go.mod",                                       // not below samples/
		"/istio/istio/master/samples/../go.mod",                            // cleaned: not below samples/
		"/istio/istio/master/samples/bookinfo/none.yaml",                   // missing
		"/kubernetes-sigs/gateway-api/main/samples/bookinfo/bookinfo.yaml", // another repository
	} {
		if got, ok := IstioSampleFile(p); ok {
			t.Errorf("IstioSampleFile(%q) = %q, want none", p, got)
		}
	}
	h, err := ExternalHandler(ExternalGitHubRaw, true)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "https://raw.githubusercontent.com/istio/istio/master/samples/sleep/sleep.yaml", nil))
	want, _ := os.ReadFile(filepath.Join(IstioModuleDir(), "samples", "sleep", "sleep.yaml"))
	if rec.Code != 200 || rec.Body.String() != string(want) {
		t.Errorf("the world's raw.githubusercontent.com: %d\n%s", rec.Code, rec.Body.String())
	}
}
