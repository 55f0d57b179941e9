package trace

import (
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/meshlab/meshlab/api"
)

// counterLine matches one rule of `iptables-save -c`: "[packets:bytes] -A CHAIN spec".
var counterLine = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\[(\d+):\d+\] -A (\S+) (.*)$`) })

// commentArg finds a rule's -m comment, quoted or not, as iptables-save prints it.
var commentArg = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`--comment (?:"((?:[^"\\]|\\.)*)"|(\S+))`) })

// savedRule is one rule of a table with its packet counter.
type savedRule struct {
	table, chain, spec string
	packets            int64
}

// parseCounters reads the rules and their packet counters from `iptables-save -c`
// output, in order. Policies (":CHAIN POLICY [p:b]") and other lines are skipped.
func parseCounters(save string) []savedRule {
	var out []savedRule
	table := ""
	for _, line := range strings.Split(save, "\n") {
		line = strings.TrimSpace(line)
		if t, ok := strings.CutPrefix(line, "*"); ok {
			table = t
			continue
		}
		m := counterLine().FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil {
			continue
		}
		out = append(out, savedRule{table: table, chain: m[2], spec: m[3], packets: n})
	}
	return out
}

// ruleDeltas returns the rules of after whose packet counter rose since before (rules
// are matched by table, chain, text and position among identical rules), in after's order.
func ruleDeltas(before, after []savedRule) []api.TraceRule {
	seen := map[string]int{}
	prev := map[string]int64{}
	key := func(r savedRule) string {
		k := r.table + "\x00" + r.chain + "\x00" + r.spec
		seen[k]++
		return k + "\x00" + strconv.Itoa(seen[k])
	}
	for _, r := range before {
		prev[key(r)] = r.packets
	}
	clear(seen)
	out := []api.TraceRule{}
	for _, r := range after {
		d := r.packets - prev[key(r)]
		if d <= 0 {
			continue
		}
		out = append(out, api.TraceRule{Table: r.table, Chain: r.chain, Rule: "-A " + r.chain + " " + r.spec, Comment: ruleComment(r.spec), Packets: d})
	}
	return out
}

// ruleComment returns the rule's -m comment, unquoted.
func ruleComment(spec string) string {
	m := commentArg().FindStringSubmatch(spec)
	if m == nil {
		return ""
	}
	if m[2] != "" {
		return m[2]
	}
	return strings.ReplaceAll(m[1], `\"`, `"`)
}
