package runner

import (
	"errors"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/controlplane/config"

	"github.com/meshlab/meshlab/scenarios"
)

// base is a valid lab on the bundled hello scenario; cases replace one line of it.
const base = `apiVersion: meshlab.dev/v1alpha1
kind: Lab
metadata:
  name: t
spec:
  title: test
  scenario: hello
  steps:
    - name: one
      instructions: send requests
      actions:
        - traffic: {from: frontend-v1, url: "http://backend:8080/", count: 10}
      verify:
        - traffic: {from: frontend-v1, url: "http://backend:8080/", count: 5}
      checks:
        - distribution: {want: {v1: 50, v2: 50}, tolerance: 10%}
`

func parse(t *testing.T, text string) (*Lab, error) {
	t.Helper()
	return Parse("t.yaml", []byte(text), Sources{Scenario: scenarios.Lookup})
}

func TestParseValid(t *testing.T) {
	l, err := parse(t, base)
	if err != nil {
		t.Fatal(err)
	}
	if l.Name != "t" || len(l.Steps) != 1 || l.Steps[0].Actions[0].Traffic.N != 10 || l.Steps[0].Verify[0].Traffic.N != 5 {
		t.Fatalf("parsed %+v", l)
	}
	if c := l.Steps[0].Checks[0]; c.Kind != "distribution" || *c.Distribution.Tolerance != 10 {
		t.Fatalf("check %+v", c)
	}
	if l.versions["backend-v2"] != "v2" {
		t.Fatalf("versions %v", l.versions)
	}
}

func TestParseRefuses(t *testing.T) {
	tests := []struct {
		name, old, new, want string
	}{
		{"unknown action", "- traffic:", "- teleport:", `step 1 (one): spec.steps[0].actions[0].teleport: unknown action "teleport"`},
		{"unknown check", "- distribution:", "- vibes:", `spec.steps[0].checks[0].vibes: unknown check "vibes"`},
		{"unknown pod", "from: frontend-v1", "from: frontend-v9", `spec.steps[0].actions[0].traffic.from: the lab has no pod "frontend-v9"`},
		{"unknown service", "http://backend:8080/", "http://nothere:8080/", `traffic.url: the lab has no service "nothere"`},
		{"double percent", "tolerance: 10%", `tolerance: "10%%"`, `"10%%" is not a percentage`},
		{"negative percent", "tolerance: 10%", `tolerance: "-5%"`, `checks[0].distribution.tolerance: "-5%" is not a percentage`},
		{"unknown version", "v2: 50}", "v3: 50}", `want.v3: no pod of the lab has version "v3"`},
		{"shares", "v2: 50}", "v2: 40}", `shares add up to 90%`},
		{"unknown field", "count: 10}", "count: 10, rate: 3}", `unknown field "rate"`},
		{"empty wait", "- traffic: {from: frontend-v1, url: \"http://backend:8080/\", count: 10}", "- wait: {}", `set duration or until`},
		{"header without name", "- distribution: {want: {v1: 50, v2: 50}, tolerance: 10%}", "- header: {value: x}", `checks[0].header.name: required`},
		{"absent with min", "- distribution: {want: {v1: 50, v2: 50}, tolerance: 10%}", "- header: {name: x, absent: true, min: 1}", `absent excludes min`},
		{"bad request header", "count: 10}", "count: 10, headers: {\"bad name\": x}}", `headers: invalid name "bad name"`},
		{"bad method", "count: 10}", "count: 10, method: FETCH}", `method: want one of GET`},
		{"mtls identity", "- distribution: {want: {v1: 50, v2: 50}, tolerance: 10%}", "- mtls: {from: frontend-v1, to: backend-v1, identity: backend}", `mtls.identity: want a SPIFFE ID`},
		{"long stop", "- traffic: {from: frontend-v1, url: \"http://backend:8080/\", count: 10}", "- control-plane-stop: {duration: 1h}", `want a duration up to 10m`},
		{"two keys", "- traffic:", "- wait: {duration: 1s}\n          traffic:", `want exactly one action`},
		{"bad scenario", "scenario: hello", "scenario: nosuch", `spec.scenario: look up scenario "nosuch"`},
		{"no name", "  - name: one", "  - name: \"\"", `spec.steps[0].name: required`},
		{"no instructions", "instructions: send requests", "instructions: \" \"", `spec.steps[0].instructions: required`},
		{"verify applies", "- traffic: {from: frontend-v1, url: \"http://backend:8080/\", count: 5}", "- restart-proxy: {pod: backend-v1}", `verify[0].restart-proxy: verify runs before every check: traffic and wait only`},
		{"status from unknown pod", "- distribution: {want: {v1: 50, v2: 50}, tolerance: 10%}", "- status: {code: \"200\", min: 1, from: nobody}", `checks[0].status.from: the lab has no pod "nobody"`},
		{"stale unknown pod", "- distribution: {want: {v1: 50, v2: 50}, tolerance: 10%}", "- proxy-stale: {pod: nobody}", `checks[0].proxy-stale.pod: the lab has no pod "nobody"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Replace(base, tc.old, tc.new, 1)
			if text == base {
				t.Fatalf("case does not change the lab")
			}
			_, err := parse(t, text)
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("got %v, want an ErrorList", err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "t.yaml") {
				t.Fatalf("got %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestParsePercent(t *testing.T) {
	for in, want := range map[string]Percent{"10%": 10, "2.5%": 2.5, "100": 100, "0%": 0} {
		if got, err := ParsePercent(in); err != nil || got != want {
			t.Errorf("ParsePercent(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"10%%", "-5%", "+5%", "101%", "", "%", "1e2%", "NaN%", "inf"} {
		if _, err := ParsePercent(in); err == nil {
			t.Errorf("ParsePercent(%q) succeeded", in)
		}
	}
}

func TestBundledLabsParse(t *testing.T) {
	names := scenarios.LabNames()
	if len(names) == 0 {
		t.Fatal("no bundled labs")
	}
	for _, n := range names {
		if _, err := Load(n); err != nil {
			t.Errorf("lab %s: %v", n, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(base)
	f.Add(strings.Replace(base, "10%", "10%%", 1))
	f.Add("apiVersion: meshlab.dev/v1alpha1\nkind: Lab\nmetadata: {name: x}\nspec: {steps: [{name: a, checks: [{wait: {}}]}]}\n")
	f.Fuzz(func(t *testing.T, text string) {
		l, err := Parse("f.yaml", []byte(text), Sources{Scenario: scenarios.Lookup})
		if err == nil && (l == nil || len(l.Steps) == 0) {
			t.Fatalf("accepted a lab without steps")
		}
	})
}

// TestScenarioSkipsLab: `meshlab up` of a lab file loads its objects and ignores the Lab.
func TestScenarioSkipsLab(t *testing.T) {
	data, _, err := scenarios.LookupLab("retries")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := config.Load("retries.yaml", data)
	if err != nil {
		t.Fatalf("load a lab file as a scenario: %v", err)
	}
	if len(sc.Objects) != 3 {
		t.Fatalf("got %d objects, want the 3 of the scenario", len(sc.Objects))
	}
}
