package fidelity

import (
	"fmt"
	"sort"
	"strings"

	"google.golang.org/protobuf/types/known/anypb"
)

// verdict is what a sidecar did with one of istiod's resources.
type verdict struct {
	Type, Name string
	Accepted   bool
	Reason     string // why it was refused
}

// judge returns one verdict per resource istiod sent: accepted when the proxy's
// /config_dump holds it as active, else refused with the reason found in the dump's
// error_state, in the proxy's NACKs for its type, or "not applied".
func judge(sent map[string]map[string]*anypb.Any, nacks map[string][]string, dump map[string]any) []verdict {
	active, errs := dumpState(dump)
	var out []verdict
	for _, typ := range typeOrder {
		names := make([]string, 0, len(sent[typ]))
		for n := range sent[typ] {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			v := verdict{Type: shortNames[typ], Name: n, Accepted: active[typ][n]}
			if !v.Accepted {
				v.Reason = refusalReason(n, names, errs[typ][n], nacks[typ])
			}
			out = append(out, v)
		}
	}
	return out
}

// refusalReason finds why resource name was refused: its own error_state, else its part
// of a NACK message ("... name: reason, other: reason"), else the last whole NACK.
func refusalReason(name string, all []string, errState string, nacks []string) string {
	if errState != "" {
		return normalizeReason(name, errState)
	}
	for i := len(nacks) - 1; i >= 0; i-- {
		msg := nacks[i]
		at := strings.Index(msg, name+": ")
		if at < 0 {
			continue
		}
		rest := msg[at+len(name)+2:]
		end := len(rest)
		for _, other := range all {
			if j := strings.Index(rest, ", "+other+": "); j >= 0 && j < end {
				end = j
			}
		}
		return normalizeReason(name, rest[:end])
	}
	if len(nacks) > 0 {
		return normalizeReason(name, nacks[len(nacks)-1])
	}
	return "not applied, and no NACK names it"
}

// normalizeReason makes reasons comparable across resources: the resource's own name,
// quoted, is replaced by <name>; whitespace is folded.
func normalizeReason(name, reason string) string {
	for _, q := range []string{"'", `"`} {
		reason = strings.ReplaceAll(reason, q+name+q, q+"<name>"+q)
	}
	return strings.Join(strings.Fields(reason), " ")
}

// dumpState reads a /config_dump: the names active per type and, for listeners, the
// error_state details by name.
func dumpState(dump map[string]any) (active map[string]map[string]bool, errs map[string]map[string]string) {
	active = map[string]map[string]bool{}
	errs = map[string]map[string]string{}
	for _, t := range typeOrder {
		active[t], errs[t] = map[string]bool{}, map[string]string{}
	}
	configs, _ := dump["configs"].([]any)
	for _, c := range configs {
		sec, _ := c.(map[string]any)
		switch sec["@type"] {
		case "type.googleapis.com/envoy.admin.v3.ListenersConfigDump":
			for _, dl := range list(sec["dynamic_listeners"]) {
				name := str(dl["name"])
				if as, ok := dl["active_state"].(map[string]any); ok && as["listener"] != nil {
					active[listenerType][name] = true
				}
				if es, ok := dl["error_state"].(map[string]any); ok && name != "" {
					errs[listenerType][name] = str(es["details"])
				}
			}
		case "type.googleapis.com/envoy.admin.v3.ClustersConfigDump":
			for _, dc := range list(sec["dynamic_active_clusters"]) {
				if cl, ok := dc["cluster"].(map[string]any); ok {
					active[clusterType][str(cl["name"])] = true
				}
			}
		case "type.googleapis.com/envoy.admin.v3.RoutesConfigDump":
			for _, dr := range list(sec["dynamic_route_configs"]) {
				if rc, ok := dr["route_config"].(map[string]any); ok {
					active[routeType][str(rc["name"])] = true
				}
			}
		case "type.googleapis.com/envoy.admin.v3.EndpointsConfigDump":
			for _, de := range list(sec["dynamic_endpoint_configs"]) {
				if ec, ok := de["endpoint_config"].(map[string]any); ok {
					active[endpointType][str(ec["cluster_name"])] = true
				}
			}
		}
	}
	return active, errs
}

func list(v any) []map[string]any {
	l, _ := v.([]any)
	out := make([]map[string]any, 0, len(l))
	for _, e := range l {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func str(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}
