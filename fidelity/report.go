package fidelity

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// podResult is what one sidecar pod of a scenario measured.
type podResult struct {
	Pod      string
	Verdicts []verdict
	Diffs    []difference
}

// counts returns sent, accepted and refused resources of one type ("" for all).
func (r podResult) counts(typ string) (sent, accepted, refused int) {
	accepted, refused = tally(r.Verdicts, typ)
	return accepted + refused, accepted, refused
}

// tally counts the accepted and refused verdicts of one type (a short name; "" for all).
func tally(verdicts []verdict, typ string) (accepted, refused int) {
	for _, v := range verdicts {
		if typ != "" && v.Type != typ {
			continue
		}
		if v.Accepted {
			accepted++
		} else {
			refused++
		}
	}
	return accepted, refused
}

// addReasons counts verdicts' refusal reasons ("<type>: <reason>") into reasons.
func addReasons(reasons map[string]int, verdicts []verdict) {
	for _, v := range verdicts {
		if !v.Accepted {
			reasons[v.Type+": "+v.Reason]++
		}
	}
}

// writeReasons prints the distinct refusal reasons with their counts, or that there are
// none.
func writeReasons(w io.Writer, reasons map[string]int) {
	if len(reasons) == 0 {
		fmt.Fprintln(w, "refusal reasons: none")
		return
	}
	keys := make([]string, 0, len(reasons))
	for k := range reasons {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(w, "distinct refusal reasons: %d\n", len(keys))
	for _, k := range keys {
		fmt.Fprintf(w, "  %4dx %s\n", reasons[k], truncate(k, 300))
	}
}

// writeTable prints one scenario's table: per pod and type, istiod's resources sent,
// accepted and refused by the sidecar, and meshlab's differences from them; then the
// distinct refusal reasons.
func writeTable(w io.Writer, scenario string, results []podResult) {
	fmt.Fprintf(w, "\n== %s: istiod -> meshlab proxy ==\n", scenario)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tTYPE\tSENT\tACCEPTED\tREFUSED\tDIFFS")
	reasons := map[string]int{}
	for _, r := range results {
		diffs := map[string]int{}
		for _, d := range r.Diffs {
			diffs[d.Type]++
		}
		for _, typ := range typeOrder {
			s := shortNames[typ]
			sent, acc, ref := r.counts(s)
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\n", r.Pod, s, sent, acc, ref, diffs[s])
		}
		addReasons(reasons, r.Verdicts)
	}
	tw.Flush()
	writeReasons(w, reasons)
}

func truncate(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// summary is one scenario's line in a closing table (the sidecar run's, the ambient run's).
type summary struct {
	Scenario                               string
	Pods, Sent, Accepted, Refused, Reasons int // Pods: sidecars, or ambient pods
	Diffs                                  int // differences (type, name, path, kind)
}

func summarize(scenario string, results []podResult) summary {
	s := summary{Scenario: scenario, Pods: len(results)}
	reasons, diffs := map[string]bool{}, map[string]bool{}
	for _, r := range results {
		sent, acc, ref := r.counts("")
		s.Sent += sent
		s.Accepted += acc
		s.Refused += ref
		for _, v := range r.Verdicts {
			if !v.Accepted {
				reasons[v.Type+": "+v.Reason] = true
			}
		}
		for _, d := range r.Diffs {
			diffs[d.String()] = true
		}
	}
	s.Reasons, s.Diffs = len(reasons), len(diffs)
	return s
}

// writeSummary prints the closing table: per scenario, istiod's resources the sidecars
// were sent, accepted and refused, the distinct refusal reasons and the distinct
// differences of meshlab's generator from istiod's.
func writeSummary(w io.Writer, rows []summary) {
	writeSummaryTable(w, "fidelity summary (all sidecars of each scenario)", "SIDECARS", rows)
}

// writeSummaryTable prints a closing table titled title, its pod column headed pods, and
// a total line.
func writeSummaryTable(w io.Writer, title, pods string, rows []summary) {
	fmt.Fprintf(w, "\n== %s ==\n", title)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "SCENARIO\t%s\tSENT\tACCEPTED\tREFUSED\tREASONS\tDIFFS\n", pods)
	var t summary
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\n", r.Scenario, r.Pods, r.Sent, r.Accepted, r.Refused, r.Reasons, r.Diffs)
		t.Pods += r.Pods
		t.Sent += r.Sent
		t.Accepted += r.Accepted
		t.Refused += r.Refused
		t.Diffs += r.Diffs
	}
	fmt.Fprintf(tw, "total\t%d\t%d\t%d\t%d\t-\t%d\n", t.Pods, t.Sent, t.Accepted, t.Refused, t.Diffs)
	tw.Flush()
}
