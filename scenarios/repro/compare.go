package repro

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/meshlab/meshlab/api"
)

// Difference is one fact that differs between the recorded lab and the rebuilt one.
type Difference struct {
	Pod      string
	Fact     string // data plane, proxy version, capture, xDS, NACKs, pod
	Recorded string
	Now      string
}

// Compare returns, pod by pod, the facts of now that differ from recorded. Config
// version strings are not compared (a rebuilt lab numbers its pushes anew); the last
// answer and resource count per type and every NACK of the history are.
func Compare(recorded, now Facts) []Difference {
	var out []Difference
	nowByPod := map[string]PodFacts{}
	for _, p := range now.Pods {
		nowByPod[p.Pod] = p
	}
	seen := map[string]bool{}
	for _, r := range recorded.Pods {
		seen[r.Pod] = true
		n, ok := nowByPod[r.Pod]
		if !ok {
			out = append(out, Difference{Pod: r.Pod, Fact: "pod", Recorded: "present", Now: "missing"})
			continue
		}
		add := func(fact, a, b string) {
			if a != b {
				out = append(out, Difference{Pod: r.Pod, Fact: fact, Recorded: a, Now: b})
			}
		}
		add("data plane", r.DataPlane, n.DataPlane)
		add("proxy version", r.ProxyVersion, n.ProxyVersion)
		add("capture", captureDiff(r.Capture, n.Capture), captureDiff(n.Capture, r.Capture))
		add("xDS", lastTypes(r), lastTypes(n))
		add("NACKs", nacks(r), nacks(n))
	}
	for _, n := range now.Pods {
		if !seen[n.Pod] {
			out = append(out, Difference{Pod: n.Pod, Fact: "pod", Recorded: "missing", Now: "present"})
		}
	}
	return out
}

// captureDiff lists the rules of a that b lacks.
func captureDiff(a, b []string) string {
	var only []string
	for _, r := range a {
		if !slices.Contains(b, r) {
			only = append(only, r)
		}
	}
	if len(only) == 0 {
		return ""
	}
	return "only here: " + strings.Join(only, " | ")
}

// lastTypes renders, per type, the answer to the last version that carried it:
// "CDS ACK/3, LDS ACK/2".
func lastTypes(p PodFacts) string {
	if len(p.History) == 0 {
		return "no history"
	}
	last := map[string]api.HistoryType{}
	for _, s := range p.History {
		maps.Copy(last, s.Types)
	}
	parts := make([]string, 0, len(last))
	for _, t := range slices.Sorted(maps.Keys(last)) {
		ht := last[t]
		parts = append(parts, fmt.Sprintf("%s %s/%d", t, cmpOr(ht.State, "-"), ht.Resources))
	}
	return strings.Join(parts, ", ")
}

// nacks lists every NACK of the history by type and error, without versions.
func nacks(p PodFacts) string {
	var out []string
	for _, s := range p.History {
		for _, t := range slices.Sorted(maps.Keys(s.Types)) {
			ht := s.Types[t]
			if ht.State != "NACK" {
				continue
			}
			if n := t + ": " + ht.Error; !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}
