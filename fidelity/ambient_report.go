package fidelity

import (
	"fmt"
	"io"
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
	accepted, refused = tally(r.Verdicts, shortNames[typ])
	return len(r.Sent[typ]), accepted, refused
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
	addReasons(reasons, r.Verdicts)
	writeReasons(w, reasons)
}

// summarizeAmbient is one ambient scenario's line in the closing table (summary, Pods
// its ambient pods).
func summarizeAmbient(scenario string, r ambientResult) summary {
	s := summary{Scenario: scenario, Pods: r.AmbientPods, Diffs: len(r.Diffs)}
	for _, typ := range ambientTypes {
		sent, acc, ref := r.counts(typ)
		s.Sent += sent
		s.Accepted += acc
		s.Refused += ref
	}
	reasons := map[string]int{}
	addReasons(reasons, r.Verdicts)
	s.Reasons = len(reasons)
	return s
}

// writeAmbientSummary prints the closing ambient table: per scenario, its ambient pods,
// istiod's WDS resources, how many meshlab's ztunnel accepted and refused, the distinct
// refusal reasons and meshlab's generator's differences.
func writeAmbientSummary(w io.Writer, rows []summary) {
	writeSummaryTable(w, "ambient fidelity summary (istiod's WDS for one ztunnel)", "AMBIENT PODS", rows)
}
