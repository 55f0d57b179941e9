package archrules

import (
	"bufio"
	"os"
	"slices"
	"strings"
	"testing"
)

// mapRow is one row of docs/ARCHITECTURE.md's package map.
type mapRow struct {
	pattern   string   // "lab", or "netns/..." for the packages below netns
	mayImport []string // patterns; nil for none
	line      int
}

// readPackageMap parses the table under "## Package map" in docs/ARCHITECTURE.md.
func readPackageMap(t *testing.T) []mapRow {
	t.Helper()
	const path = "../../docs/ARCHITECTURE.md"
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []mapRow
	in := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Package map"
			continue
		}
		if !in || !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 3 {
			t.Fatalf("%s:%d: a package map row has 3 cells (package, job, may import), got %d: %q", path, n, len(cells), line)
		}
		r := mapRow{pattern: strings.Trim(strings.TrimSpace(cells[0]), "`"), line: n}
		switch imp := strings.TrimSpace(cells[2]); imp {
		case "any":
			t.Fatalf("%s:%d: row %q says any: every row lists what it may import (the CLI's too)", path, n, r.pattern)
		case "-":
		default:
			for _, p := range strings.Split(imp, ",") {
				r.mayImport = append(r.mayImport, strings.Trim(strings.TrimSpace(p), "`"))
			}
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) < 10 {
		t.Fatalf("%s: found %d package map rows under \"## Package map\"; the map is missing or its format changed", path, len(rows))
	}
	return rows
}

// matches reports whether the module-relative package rel is what pattern names: the
// package itself, or for "x/..." a package strictly below x.
func matches(pattern, rel string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return strings.HasPrefix(rel, base+"/")
	}
	return rel == pattern
}

// rowFor is the most specific row for rel: its own, else the longest "/..." row above it.
func rowFor(rows []mapRow, rel string) (mapRow, bool) {
	best, found := mapRow{}, false
	for _, r := range rows {
		if !matches(r.pattern, rel) {
			continue
		}
		if r.pattern == rel {
			return r, true
		}
		if !found || len(r.pattern) > len(best.pattern) {
			best, found = r, true
		}
	}
	return best, found
}

// directImports lists the module packages rel imports directly (not its tests).
func directImports(p listed) []string {
	var out []string
	for _, imp := range p.Imports {
		if rel, ok := strings.CutPrefix(imp, module); ok {
			out = append(out, rel)
		}
	}
	return out
}

func TestPackageMapMatchesGoList(t *testing.T) {
	rows := readPackageMap(t)
	pkgs := packages(t)
	used := map[string]bool{}
	for _, p := range pkgs {
		rel, ok := strings.CutPrefix(p.ImportPath, module)
		if !ok {
			continue
		}
		r, ok := rowFor(rows, rel)
		if !ok {
			t.Errorf("package %s has no row in docs/ARCHITECTURE.md's package map: add one (its job, what it may import)", rel)
			continue
		}
		used[r.pattern] = true
		for _, dep := range directImports(p) {
			if !slices.ContainsFunc(r.mayImport, func(pat string) bool { return matches(pat, dep) }) {
				t.Errorf("%s imports %s, which its package map row (docs/ARCHITECTURE.md:%d, %q) does not allow", rel, dep, r.line, r.pattern)
			}
		}
	}
	for _, r := range rows {
		if !used[r.pattern] {
			t.Errorf("docs/ARCHITECTURE.md:%d: package map row %q names no package of the module", r.line, r.pattern)
		}
	}
}

func TestPackageMapMatching(t *testing.T) {
	rows := []mapRow{{pattern: "netns"}, {pattern: "netns/..."}, {pattern: "dataplane/proxy/..."}, {pattern: "dataplane/proxy"}}
	for rel, want := range map[string]string{
		"netns":                        "netns",
		"netns/capture":                "netns/...",
		"dataplane/proxy":              "dataplane/proxy",
		"dataplane/proxy/filters/rbac": "dataplane/proxy/...",
	} {
		if r, ok := rowFor(rows, rel); !ok || r.pattern != want {
			t.Errorf("rowFor(%q) = %q, %v; want %q", rel, r.pattern, ok, want)
		}
	}
	if _, ok := rowFor(rows, "netnsx"); ok {
		t.Error(`"netnsx" must not match "netns" or "netns/..."`)
	}
}
