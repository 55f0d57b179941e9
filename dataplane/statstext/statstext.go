// Package statstext parses Envoy's text /stats form (GET /stats on the admin API, or
// /admin/stats through a pod's agent): one "name: value" line per stat, where a counter's
// or gauge's value is an unsigned integer and a histogram's is a summary, either
// quantiles ("P0(nan,1) P25(nan,2.05) ...") or, with ?histogram_buckets, buckets
// ("B0.5(0,0) B1(0,3) ..."), or "No recorded values". It is the one reader of that form
// for the lab, the lab runner, the CLI and the agent; the proxy's own renderer is
// dataplane/proxy/stats.
package statstext

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode"
)

// maxLine bounds one line: a histogram summary of Envoy's default buckets is under 1 KiB,
// so 1 MiB only stops a runaway answer.
const maxLine = 1 << 20

// noValues is a histogram's summary before it recorded anything.
const noValues = "No recorded values"

// Stats is one text /stats answer.
type Stats struct {
	// Values are the counters and gauges: the lines whose value is an unsigned integer.
	Values map[string]uint64
	// Histograms are the lines whose value is a quantile or bucket summary.
	Histograms map[string]Histogram
}

// Histogram is one histogram's summary. Points is empty for "No recorded values".
type Histogram struct {
	Points []Point
}

// Point is one entry of a summary: "P99(interval,cumulative)" for the 99th percentile,
// "B0.5(interval,cumulative)" for the bucket of values up to 0.5.
type Point struct {
	// Label is the entry's name as printed: "P99", "P99.9", "B0.5", "B3.6e+06".
	Label string
	// Interval is the value in the last flush interval, Cumulative since the start; NaN
	// where Envoy prints "nan" (a quantile with no samples in the interval).
	Interval, Cumulative float64
}

// Parse reads a text /stats answer. Lines of another shape (no ": ", a name with a space
// or control character, text readouts, blank lines) are skipped, as every reader of the form did before it; the error is
// only the reader's, or a line longer than 1 MiB.
func Parse(r io.Reader) (Stats, error) {
	out := Stats{Values: map[string]uint64{}, Histograms: map[string]Histogram{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), ": ")
		name, val = strings.TrimSpace(name), strings.TrimSpace(val)
		if !ok || !validName(name) {
			continue
		}
		if n, err := strconv.ParseUint(val, 10, 64); err == nil {
			out.Values[name] = n
			continue
		}
		if h, err := parseHistogram(val); err == nil {
			out.Histograms[name] = h
		}
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("read text stats: %w", err)
	}
	return out, nil
}

// validName reports whether name can be a stat's: not empty, no space or control
// character (Envoy's names are dot-separated tokens; a tag value such as a cluster name
// may hold '|' or ':' but never a space).
func validName(name string) bool {
	return name != "" && !strings.ContainsFunc(name, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) })
}

// ParseValues is Parse's counters and gauges, for the readers that want only those.
func ParseValues(r io.Reader) (map[string]uint64, error) {
	s, err := Parse(r)
	return s.Values, err
}

// parseHistogram reads a summary: "No recorded values", or space-separated points
// "<P|B><number>(<interval>,<cumulative>)" all of one kind.
func parseHistogram(s string) (Histogram, error) {
	if s == noValues {
		return Histogram{}, nil
	}
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return Histogram{}, errors.New("empty summary")
	}
	h := Histogram{Points: make([]Point, 0, len(fields))}
	for _, f := range fields {
		p, err := parsePoint(f)
		if err != nil {
			return Histogram{}, err
		}
		if p.Label[0] != fields[0][0] {
			return Histogram{}, fmt.Errorf("point %q: quantiles and buckets mixed", f)
		}
		h.Points = append(h.Points, p)
	}
	return h, nil
}

// parsePoint reads one "P25(nan,2.05)" or "B0.5(0,3)".
func parsePoint(f string) (Point, error) {
	label, rest, ok := strings.Cut(f, "(")
	if !ok || len(label) < 2 || (label[0] != 'P' && label[0] != 'B') || !strings.HasSuffix(rest, ")") {
		return Point{}, fmt.Errorf("point %q: want P<q>(a,b) or B<le>(a,b)", f)
	}
	if v, err := strconv.ParseFloat(label[1:], 64); err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return Point{}, fmt.Errorf("point %q: %q is not a number", f, label[1:])
	}
	a, b, ok := strings.Cut(strings.TrimSuffix(rest, ")"), ",")
	if !ok {
		return Point{}, fmt.Errorf("point %q: want two values", f)
	}
	iv, err := parseValue(a)
	if err != nil {
		return Point{}, fmt.Errorf("point %q: interval: %w", f, err)
	}
	cv, err := parseValue(b)
	if err != nil {
		return Point{}, fmt.Errorf("point %q: cumulative: %w", f, err)
	}
	return Point{Label: label, Interval: iv, Cumulative: cv}, nil
}

// parseValue reads a summary value: a finite number, or "nan" as Envoy prints NaN.
func parseValue(s string) (float64, error) {
	if s == "nan" {
		return math.NaN(), nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	return v, nil
}
