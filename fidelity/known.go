package fidelity

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// The known list of a scenario, testdata/known/<scenario>.txt, holds every refusal and
// every difference from istiod that is known, grouped under the reason it is accepted:
//
//	## <reason, one line>
//	refuse LDS virtualInbound: <the proxy's reason>
//	diff CDS outbound|80||web.default.svc.cluster.local metadata missing
//
// Lines starting with "#" (but not "## ") are comments. It is a ratchet: an entry the
// run does not find must be removed (the count only goes down), an entry the run finds
// that is not listed fails the test. MESHLAB_UPDATE_GOLDEN=1 rewrites the file: listed
// entries keep their reason, new ones go under untriaged.
const untriaged = "untriaged: measured, reason not yet written"

// knownList maps each known entry to its reason.
type knownList map[string]string

func knownPath(scenario string) string {
	return filepath.Join("testdata", "known", scenario+".txt")
}

func readKnown(path string) (knownList, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return knownList{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read known list: %w", err)
	}
	defer f.Close()
	k := knownList{}
	reason := untriaged
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for line := 1; sc.Scan(); line++ {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "## "):
			reason = strings.TrimSpace(l[3:])
		case strings.TrimSpace(l) == "", strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "refuse "), strings.HasPrefix(l, "diff "):
			k[l] = reason
		default:
			return nil, fmt.Errorf("read known list %s:%d: want \"refuse ...\", \"diff ...\" or \"## reason\", got %q", path, line, l)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read known list %s: %w", path, err)
	}
	return k, nil
}

// compare returns the entries found but not known (new) and known but not found (gone).
func (k knownList) compare(found map[string]bool) (added, gone []string) {
	for e := range found {
		if _, ok := k[e]; !ok {
			added = append(added, e)
		}
	}
	for e := range k {
		if !found[e] {
			gone = append(gone, e)
		}
	}
	sort.Strings(added)
	sort.Strings(gone)
	return added, gone
}

// reasonsPath holds reasons by pattern (see the file): an entry that has no reason of its
// own takes the reason of the first pattern matching it.
var reasonsPath = filepath.Join("testdata", "reasons.txt")

// pattern is one line of the reasons file: a glob ("*" matches anything) and its reason.
type pattern struct {
	re     *regexp.Regexp
	reason string
}

// readPatterns reads the reasons file, in file order; a missing file has none.
func readPatterns(path string) ([]pattern, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read reasons: %w", err)
	}
	var out []pattern
	reason := ""
	for i, l := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(l, "## "):
			reason = strings.TrimSpace(l[3:])
		case strings.TrimSpace(l) == "", strings.HasPrefix(l, "#"):
		case reason == "":
			return nil, fmt.Errorf("read reasons %s:%d: a pattern before any \"## reason\" line", path, i+1)
		default:
			expr := "^" + strings.ReplaceAll(regexp.QuoteMeta(l), `\*`, ".*") + "$"
			out = append(out, pattern{re: regexp.MustCompile(expr), reason: reason})
		}
	}
	return out, nil
}

// classify returns the reason of the first pattern matching entry, or untriaged.
func classify(patterns []pattern, entry string) string {
	for _, p := range patterns {
		if p.re.MatchString(entry) {
			return p.reason
		}
	}
	return untriaged
}

// writeKnown writes found as the known list of scenario, each entry under the reason
// old gives it, else under the reason of the first pattern matching it, else untriaged.
func writeKnown(path, scenario string, old knownList, found map[string]bool, patterns []pattern) error {
	byReason := map[string][]string{}
	for e := range found {
		r, ok := old[e]
		if !ok || r == untriaged {
			r = classify(patterns, e)
		}
		byReason[r] = append(byReason[r], e)
	}
	reasons := make([]string, 0, len(byReason))
	for r := range byReason {
		reasons = append(reasons, r)
	}
	sort.Slice(reasons, func(i, j int) bool {
		if (reasons[i] == untriaged) != (reasons[j] == untriaged) {
			return reasons[j] == untriaged
		}
		return reasons[i] < reasons[j]
	})
	var b strings.Builder
	fmt.Fprintf(&b, "# Known refusals and differences from istiod for scenario %s (see docs/FIDELITY.md).\n", scenario)
	b.WriteString("# Refresh: cd fidelity && MESHLAB_UPDATE_GOLDEN=1 go test -count=1 -run TestFidelity .\n")
	for _, r := range reasons {
		es := byReason[r]
		sort.Strings(es)
		fmt.Fprintf(&b, "\n## %s\n", r)
		for _, e := range es {
			b.WriteString(e + "\n")
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write known list: %w", err)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write known list: %w", err)
	}
	return nil
}
