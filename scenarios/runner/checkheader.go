package runner

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/meshlab/meshlab/api"
)

// header evaluates a header check against the step's last traffic. The traffic tool
// keeps per header name the number of answers carrying it and up to
// api.MaxHeaderValues distinct values; with Value set, the count is exact only while
// every carrying answer had that one value, so the check then counts answers only when
// Value is the sole value seen (or none, when Value was never seen).
func header(h HeaderCheck, st *stepState, res *Result) {
	name := http.CanonicalHeaderKey(h.Name)
	what := name
	if h.Value != "" {
		what = fmt.Sprintf("%s: %s", name, h.Value)
	}
	res.Want = headerWant(h) + " answers with " + what
	res.Hint = "response headers come from the app and the VirtualService's headers: response set/add/remove"
	t := needTraffic(st, "", res)
	if t == nil {
		return
	}
	seen := t.Headers[name]
	n, exact := headerCount(seen, h.Value)
	ok := t.Sent - t.Statuses["error"] // answers with headers
	res.Saw = fmt.Sprintf("%d of %d answers carried %s", n, ok, name)
	if len(seen.Values) > 0 {
		res.Saw += " (values " + strings.Join(quoteAll(seen.Values), ", ") + ")"
	}
	if !exact {
		res.Saw += "; several values were seen, so the count with " + h.Value + " is at most this"
	}
	switch {
	case h.Absent:
		res.Passed = n == 0
	case h.Min == nil && h.Max == nil && h.Fraction == nil:
		res.Passed = ok > 0 && n == ok && exact
	default:
		res.Passed = exact || (h.Max != nil && h.Min == nil && h.Fraction == nil)
		if h.Min != nil && n < *h.Min {
			res.Passed = false
		}
		if h.Max != nil && n > *h.Max {
			res.Passed = false
		}
		if h.Fraction != nil && (t.Sent == 0 || 100*float64(n)/float64(t.Sent) < float64(*h.Fraction)-1e-9) {
			res.Passed = false
		}
	}
}

// headerCount returns how many answers carried the header with value (any value when
// empty), and whether that count is exact.
func headerCount(seen api.HeaderSeen, value string) (int, bool) {
	switch {
	case value == "":
		return seen.Count, true
	case !slices.Contains(seen.Values, value):
		return 0, len(seen.Values) < api.MaxHeaderValues
	case len(seen.Values) == 1:
		return seen.Count, true
	default:
		return seen.Count, false // some answers carried another value
	}
}

func headerWant(h HeaderCheck) string {
	if h.Absent {
		return "no"
	}
	var want []string
	if h.Min != nil {
		want = append(want, fmt.Sprintf("at least %d", *h.Min))
	}
	if h.Max != nil {
		want = append(want, fmt.Sprintf("at most %d", *h.Max))
	}
	if h.Fraction != nil {
		want = append(want, "at least "+h.Fraction.String()+" of")
	}
	if len(want) == 0 {
		return "all"
	}
	return strings.Join(want, " and ")
}

func quoteAll(vs []string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = fmt.Sprintf("%q", v)
	}
	return out
}
