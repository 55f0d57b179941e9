package archrules

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/meshlab/meshlab/"

// rule forbids every package under from from depending, directly or not, on any package
// under one of the prefixes in mayNot (module-relative, or a full import path with a dot).
type rule struct {
	from   string
	mayNot []string
	why    string
}

// rules are DESIGN.md's boundaries. A rule is checked on transitive dependencies: a
// package that reaches a forbidden one through a third is as coupled as one importing it.
var rules = []rule{
	{
		from:   "controlplane",
		mayNot: []string{"api", "dataplane", "netns", "lab", "scenarios/runner", "web", "scenarios/repro", "demoapp", "cmd"},
		why:    "the control plane is a pure model -> xDS generator plus its servers; it never reaches into pods or the UI",
	},
	{
		from:   "dataplane/proxy",
		mayNot: []string{"api", "controlplane", "dataplane/agent", "lab", "scenarios/runner", "web", "scenarios/repro", "cmd", "demoapp"},
		why:    "like Envoy, the proxy knows only its command line, its bootstrap and what arrives over xDS",
	},
	{
		from:   "dataplane/agent",
		mayNot: []string{"controlplane", "dataplane/proxy", "lab", "scenarios/runner", "web", "scenarios/repro", "cmd", "demoapp", "netns"},
		why:    "the agent talks to the lab and the proxy only over sockets, never by importing them",
	},
	{
		from:   "netns",
		mayNot: []string{"api", "controlplane", "dataplane/agent", "lab", "scenarios/runner", "web", "scenarios/repro", "cmd", "demoapp"},
		why:    "netns knows nothing of meshes: it makes the namespaces, links and rules it is given",
	},
	{
		from:   "demoapp",
		mayNot: []string{"api", "controlplane", "dataplane", "netns", "lab", "scenarios/runner", "web", "scenarios/repro", "cmd"},
		why:    "the demo app is an ordinary workload; it knows nothing of the mesh it runs in",
	},
	{
		from:   "web",
		mayNot: []string{"github.com/tetratelabs/func-e", "github.com/miekg/dns"},
		why:    "web reads the agent's wire types from dataplane/agent/agentapi, never through the agent itself (func-e, the DNS server)",
	},
	{
		from:   "api",
		mayNot: []string{"github.com/tetratelabs/func-e", "github.com/miekg/dns"},
		why:    "the lab API's contract carries the agent's wire types from dataplane/agent/agentapi, not the agent",
	},
	{
		from:   "dataplane/agent/agentapi",
		mayNot: []string{"github.com/tetratelabs/func-e", "github.com/miekg/dns", "google.golang.org/grpc", "github.com/envoyproxy/"},
		why:    "the agent's API is its wire types and a client over a unix socket; whoever talks to the agent imports it without the agent's machinery",
	},
	{
		from:   "api",
		mayNot: []string{"controlplane", "dataplane/proxy", "lab", "scenarios/runner", "web", "scenarios/repro", "cmd", "demoapp", "netns", "github.com/gin-gonic/"},
		why:    "the lab API's wire contract links no server and no lab: a client of the API (the CLI, the lab runner, repro) talks to a lab without gin or the lab's code",
	},
	{
		from:   "",
		mayNot: []string{"istio.io/istio/"},
		why:    "Istio's own code is an oracle in fidelity/ (a module of its own), never part of the binary",
	},
}

// listed is what `go list -deps -json` says of one package.
type listed struct {
	ImportPath string
	Imports    []string
	Deps       []string
	Module     *struct{ Path string }
}

// packages lists every package of the main module with its transitive dependencies.
func packages(t *testing.T) []listed {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Deps,Module", "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listed
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages; expected the whole module", len(pkgs))
	}
	return pkgs
}

// under reports whether the module-relative path rel is prefix or a package below it.
func under(rel, prefix string) bool {
	if prefix == "" {
		return true
	}
	return rel == prefix || strings.HasPrefix(rel, prefix+"/")
}

// forbidden reports whether dep (a full import path) is one that prefix names.
func forbidden(dep, prefix string) bool {
	if strings.Contains(prefix, ".") { // a third-party path
		return strings.HasPrefix(dep, prefix)
	}
	rel, ok := strings.CutPrefix(dep, module)
	return ok && under(rel, prefix)
}

func TestImportRules(t *testing.T) {
	pkgs := packages(t)
	for _, r := range rules {
		checked := 0
		for _, p := range pkgs {
			rel, ok := strings.CutPrefix(p.ImportPath, module)
			if !ok || !under(rel, r.from) || strings.HasPrefix(rel, "internal/archrules") {
				continue
			}
			checked++
			for _, dep := range p.Deps {
				for _, bad := range r.mayNot {
					if forbidden(dep, bad) && !under(strings.TrimPrefix(dep, module), r.from) {
						t.Errorf("%s depends on %s: %s", rel, strings.TrimPrefix(dep, module), r.why)
					}
				}
			}
		}
		if checked == 0 {
			t.Errorf("rule for %q matched no package: the layout changed, update the rule", r.from)
		}
	}
}

// TestRulesCanFail proves the checker sees a violation: the CLI legitimately depends on
// the lab, so a rule forbidding that must report it.
func TestRulesCanFail(t *testing.T) {
	pkgs := packages(t)
	i := slices.IndexFunc(pkgs, func(p listed) bool { return p.ImportPath == module+"cmd/meshlab" })
	if i < 0 {
		t.Fatal("cmd/meshlab not listed")
	}
	if !slices.ContainsFunc(pkgs[i].Deps, func(d string) bool { return forbidden(d, "lab") }) {
		t.Error("the checker did not see cmd/meshlab's dependency on lab")
	}
	if forbidden(module+"scenarios/runner", "lab") || !forbidden(module+"lab/trace", "lab") {
		t.Error("forbidden must match a package and the packages below it, not a sibling with the same prefix")
	}
}
