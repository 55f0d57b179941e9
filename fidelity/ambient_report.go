package fidelity

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	"google.golang.org/protobuf/proto"
)

// ambientResult is what one ambient scenario measured: istiod's WDS (Sent), meshlab's
// ztunnel's verdict on each of its resources, and meshlab's generator's differences.
type ambientResult struct {
	AmbientPods int
	Sent        map[string]map[string]proto.Message
	Verdicts    []verdict
	// Accept says how the verdicts were reached, or why there are none.
	Accept string
	Diffs  []difference
}

func (r ambientResult) counts(typ string) (sent, accepted, refused int) {
	sent = len(r.Sent[typ])
	for _, v := range r.Verdicts {
		if v.Type != shortNames[typ] {
			continue
		}
		if v.Accepted {
			accepted++
		} else {
			refused++
		}
	}
	return sent, accepted, refused
}

// writeAmbientTable prints one ambient scenario's table: per type, istiod's resources,
// how many meshlab's ztunnel accepted and refused, and meshlab's generator's differences;
// then the distinct refusal reasons.
func writeAmbientTable(w io.Writer, scenario string, r ambientResult) {
	fmt.Fprintf(w, "\n== %s: istiod WDS -> meshlab (ztunnel: %s) ==\n", scenario, r.Accept)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TYPE\tSENT\tACCEPTED\tREFUSED\tDIFFS")
	diffs := map[string]int{}
	for _, d := range r.Diffs {
		diffs[d.Type]++
	}
	for _, typ := range ambientTypes {
		sent, acc, ref := r.counts(typ)
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\n", shortNames[typ], sent, acc, ref, diffs[shortNames[typ]])
	}
	tw.Flush()
	reasons := map[string]int{}
	for _, v := range r.Verdicts {
		if !v.Accepted {
			reasons[v.Type+": "+v.Reason]++
		}
	}
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

// ambientSummary is one ambient scenario's line in the closing table.
type ambientSummary struct {
	Scenario                                      string
	AmbientPods, Sent, Accepted, Refused, Reasons int
	Diffs                                         int
}

func summarizeAmbient(scenario string, r ambientResult) ambientSummary {
	s := ambientSummary{Scenario: scenario, AmbientPods: r.AmbientPods, Diffs: len(r.Diffs)}
	reasons := map[string]bool{}
	for _, typ := range ambientTypes {
		sent, acc, ref := r.counts(typ)
		s.Sent += sent
		s.Accepted += acc
		s.Refused += ref
	}
	for _, v := range r.Verdicts {
		if !v.Accepted {
			reasons[v.Type+": "+v.Reason] = true
		}
	}
	s.Reasons = len(reasons)
	return s
}

// writeAmbientSummary prints the closing ambient table: per scenario, its ambient pods,
// istiod's WDS resources, how many meshlab's ztunnel accepted and refused, the distinct
// refusal reasons and meshlab's generator's differences.
func writeAmbientSummary(w io.Writer, rows []ambientSummary) {
	fmt.Fprintln(w, "\n== ambient fidelity summary (istiod's WDS for one ztunnel) ==")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tAMBIENT PODS\tSENT\tACCEPTED\tREFUSED\tREASONS\tDIFFS")
	var t ambientSummary
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\n", r.Scenario, r.AmbientPods, r.Sent, r.Accepted, r.Refused, r.Reasons, r.Diffs)
		t.AmbientPods += r.AmbientPods
		t.Sent += r.Sent
		t.Accepted += r.Accepted
		t.Refused += r.Refused
		t.Diffs += r.Diffs
	}
	fmt.Fprintf(tw, "total\t%d\t%d\t%d\t%d\t-\t%d\n", t.AmbientPods, t.Sent, t.Accepted, t.Refused, t.Diffs)
	tw.Flush()
}
