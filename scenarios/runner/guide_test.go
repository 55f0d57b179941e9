package runner

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/scenarios"
)

const guideLab = `apiVersion: meshlab.dev/v1alpha1
kind: Lab
metadata: {name: g}
spec:
  title: guide
  scenario: hello
  steps:
    - name: route
      instructions: apply the route
      solution:
        - apply: {objects: [{apiVersion: networking.istio.io/v1, kind: VirtualService, metadata: {name: backend}, spec: {hosts: [backend], http: [{route: [{destination: {host: backend}}]}]}}]}
        - traffic: {from: frontend-v1, url: "http://backend:8080/", count: 3, headers: {end-user: "o'neil"}}
      verify:
        - traffic: {from: frontend-v1, url: "http://backend:8080/", count: 10}
      checks:
        - status: {code: "200", fraction: 100%}
    - name: look
      instructions: nothing to apply here
      verify:
        - traffic: {from: frontend-v1, url: "http://backend:8080/", count: 10}
      checks:
        - status: {code: "200", min: 1}
`

// TestGuideChecksFreshTraffic walks a lab with the guide on a fake lab: the setup never
// applies the step's answer, every check sends the step's verify traffic again (so a fix
// made between two checks is seen), a step without a solution says so, and the lab is
// done once its last step passed.
func TestGuideChecksFreshTraffic(t *testing.T) {
	l, err := Parse("g.yaml", []byte(guideLab), Sources{Scenario: scenarios.Lookup})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeBackend{traffic: api.TrafficResult{Sent: 10, Statuses: map[string]int{"503": 10}}}
	g := NewGuide(l, Runner{Logger: testutil.Logger(t)})
	t.Cleanup(g.Close)
	st := g.Begin(t.Context(), f)
	if len(st.Tasks) != 2 || st.Tasks[0].Command != "meshlab apply -f -" || !strings.Contains(st.Tasks[0].Stdin, "kind: VirtualService") {
		t.Fatalf("tasks %+v", st.Tasks)
	}
	if want := `for i in $(seq 3); do meshlab exec frontend-v1 -- curl -s -o /dev/null -w '%{http_code}\n' -H 'end-user: o'\''neil' http://backend:8080/; done`; st.Tasks[1].Command != want {
		t.Errorf("traffic task\n%s\nwant\n%s", st.Tasks[1].Command, want)
	}
	if !strings.Contains(st.Instructions, "apply the route\n\nRun:\n\n```sh\nmeshlab apply -f - <<'EOF'\napiVersion: networking.istio.io/v1\nkind: VirtualService\n") {
		t.Errorf("instructions do not show the YAML to apply:\n%s", st.Instructions)
	}
	if slices.ContainsFunc(f.calls, func(c string) bool { return strings.HasPrefix(c, "apply") }) {
		t.Fatalf("beginning the step applied its answer: %v", f.calls)
	}

	c, err := g.CheckStep(t.Context())
	if err != nil || c.Passed || c.Results[0].Saw != "0 of 10 answers 200 (all: 503 x10)" {
		t.Fatalf("check before the fix: %+v, %v", c, err)
	}
	// The attendee fixes it; the next check must see it with new traffic.
	f.mu.Lock()
	f.traffic = api.TrafficResult{Sent: 10, Statuses: map[string]int{"200": 10}}
	f.mu.Unlock()
	c, err = g.CheckStep(t.Context())
	if err != nil || !c.Passed || c.Done {
		t.Fatalf("check after the fix: %+v, %v", c, err)
	}
	if n := strings.Count(strings.Join(f.calls, "\n"), "traffic frontend-v1"); n != 2 {
		t.Errorf("two checks sent traffic %d times, want 2: %v", n, f.calls)
	}

	st, err = g.NextStep(t.Context())
	if err != nil || st.Step != 2 || st.Passed != 1 || st.Done || len(st.Tasks) != 0 {
		t.Fatalf("next: %+v, %v", st, err)
	}
	if _, err := g.SolveStep(t.Context()); !errors.Is(err, api.ErrNoSolution) || !strings.Contains(err.Error(), "step 2 (look)") {
		t.Errorf("solve without a solution: %v", err)
	}
	f.mu.Lock()
	f.traffic = api.TrafficResult{Sent: 10, Statuses: map[string]int{"503": 10}}
	f.mu.Unlock()
	if c, _ := g.CheckStep(t.Context()); c.Passed {
		t.Fatalf("check passed with no 200: %+v", c)
	}
	if _, err := g.NextStep(t.Context()); !errors.Is(err, api.ErrLastStep) || !strings.Contains(err.Error(), "has not passed yet") {
		t.Errorf("next on an unfinished last step: %v", err)
	}
	f.mu.Lock()
	f.traffic = api.TrafficResult{Sent: 10, Statuses: map[string]int{"200": 10}}
	f.mu.Unlock()
	if c, _ := g.CheckStep(t.Context()); !c.Passed || !c.Done {
		t.Fatalf("the last step's check: %+v, want passed and done", c)
	}
	if st, err := g.NextStep(t.Context()); err != nil || !st.Done || st.Passed != 2 {
		t.Errorf("next after the last step: %+v, %v; want done", st, err)
	}
}

// TestBundledLabsShowTheirTask asks every step of every shipped lab for instructions
// and a command to run, and refuses a setup that applies what the solution applies.
func TestBundledLabsShowTheirTask(t *testing.T) {
	for _, n := range scenarios.LabNames() {
		l, err := Load(n)
		if err != nil {
			t.Fatal(err)
		}
		for i, st := range l.Steps {
			if len(Tasks(l, i)) == 0 {
				t.Errorf("lab %s step %d (%s): no command for the attendee to run", n, i+1, st.Name)
			}
			answer := map[string]bool{}
			for _, a := range st.Solution {
				answer[a.Kind] = a.Apply == nil
				if a.Apply != nil {
					for _, d := range docSep.Split(string(a.Apply.data), -1) {
						answer[objectKey([]byte(d))] = true
					}
				}
			}
			for _, a := range st.Actions {
				if answer[a.Kind] {
					t.Errorf("lab %s step %d (%s): the setup does what the solution does (%s)", n, i+1, st.Name, a.Kind)
				}
				if a.Apply != nil {
					for _, d := range docSep.Split(string(a.Apply.data), -1) {
						if k := objectKey([]byte(d)); answer[k] {
							t.Errorf("lab %s step %d (%s): the setup applies %s, the step's answer", n, i+1, st.Name, k)
						}
					}
				}
			}
		}
	}
}
