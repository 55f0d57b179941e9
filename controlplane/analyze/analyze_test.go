package analyze

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/controlplane/config"
	"github.com/meshlab/meshlab/internal/testutil"
)

// TestAnalyzeGolden analyses base.yaml plus one case file and compares the findings with
// testdata/<case>.golden.
func TestAnalyzeGolden(t *testing.T) {
	base := readFile(t, "base.yaml")
	cases, err := filepath.Glob("testdata/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range cases {
		name := strings.TrimSuffix(filepath.Base(path), ".yaml")
		if name == "base" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			fs := Analyze([]config.File{base, readFile(t, name+".yaml")})
			var b strings.Builder
			for _, f := range fs {
				b.WriteString(f.String() + "\n")
			}
			testutil.Golden(t, name, []byte(b.String()))
		})
	}
}

// TestAnalyzeCodes checks the one code each case is about, independently of wording.
func TestAnalyzeCodes(t *testing.T) {
	base := readFile(t, "base.yaml")
	for _, tc := range []struct {
		file     string
		code     string
		maxLevel Level
	}{
		{file: "vs-host-not-found.yaml", code: CodeVirtualServiceHostNotFound, maxLevel: Error},
		{file: "subset-not-found.yaml", code: CodeReferencedResourceNotFound, maxLevel: Error},
		{file: "dr-host-not-found.yaml", code: CodeUnknownDestinationRuleHost, maxLevel: Warning},
		{file: "vs-conflict.yaml", code: CodeConflictingMeshGatewayVirtualServiceHosts, maxLevel: Error},
		{file: "subset-no-pods.yaml", code: CodeDestinationRuleSubsetNotSelectPods, maxLevel: Error},
		{file: "deny-http-only.yaml", code: CodeSchemaWarning, maxLevel: Warning},
		{file: "delay-percent.yaml", code: CodeDeprecated, maxLevel: Warning},
		{file: "two-mesh-wide.yaml", code: CodeMultipleMeshWidePolicies, maxLevel: Error},
		{file: "mtls-conflict.yaml", code: CodeMTLSPolicyConflict, maxLevel: Error},
		{file: "policy-selects-nothing.yaml", code: CodeNoMatchingWorkloadsFound, maxLevel: Warning},
		{file: "port-names.yaml", code: CodePortNameNotUnderConvention, maxLevel: Warning},
		{file: "service-no-pods.yaml", code: CodeServiceSelectsNoPods, maxLevel: Error},
		{file: "bad-yaml.yaml", code: CodeSchemaValidationError, maxLevel: Error},
		{file: "jwt-claim-route.yaml", code: CodeJwtClaimBasedRoutingWithoutRequestAuthN, maxLevel: Error},
	} {
		t.Run(tc.file, func(t *testing.T) {
			fs := Analyze([]config.File{base, readFile(t, tc.file)})
			found := false
			for _, f := range fs {
				found = found || f.Code == tc.code
			}
			if !found {
				t.Errorf("no %s finding in %v", tc.code, fs)
			}
			if l, _ := Max(fs); l != tc.maxLevel {
				t.Errorf("max level %s, want %s (%v)", l, tc.maxLevel, fs)
			}
		})
	}
}

func TestAnalyzeClean(t *testing.T) {
	// relative-weights.yaml: Istio's weights are relative; analyze never claims Istio
	// refuses them.
	for _, name := range []string{"clean.yaml", "relative-weights.yaml"} {
		fs := Analyze([]config.File{readFile(t, "base.yaml"), readFile(t, name)})
		if len(fs) != 0 {
			t.Errorf("findings on %s: %v", name, fs)
		}
	}
}

func FuzzAnalyze(f *testing.F) {
	for _, n := range []string{"base.yaml", "mtls-conflict.yaml", "port-names.yaml"} {
		b, err := os.ReadFile(filepath.Join("testdata", n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		Analyze([]config.File{{Name: "fuzz.yaml", Data: data}})
	})
}

func readFile(tb testing.TB, name string) config.File {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return config.File{Name: name, Data: b}
}

// A cluster's dump (`kubectl get -A -o yaml`: one List, the cluster's machinery beside the
// mesh's objects) is analysed as its items; a bad item is named by its index.
func TestAnalyzeKubectlList(t *testing.T) {
	data, err := os.ReadFile("../config/testdata/kubectl-get-all.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Only fortio, a client no Service selects, is worth a word.
	if fs := Analyze([]config.File{{Name: "dump.yaml", Data: data}}); len(fs) != 1 || fs[0].Code != CodeWorkloadInNoService || fs[0].Object.Name != "fortio-deploy" {
		t.Errorf("findings on the dump: %v, want one ML0104 on the fortio pod", fs)
	}
	bad := "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: networking.istio.io/v1, kind: DestinationRule, metadata: {name: d}, spec: {host: [1]}}\n"
	fs := Analyze([]config.File{{Name: "bad.yaml", Data: []byte(bad)}})
	if len(fs) == 0 || fs[0].Code != CodeSchemaValidationError || fs[0].Object.Name != "d" {
		t.Errorf("findings %v, want a schema validation error on DestinationRule d", fs)
	}
}
