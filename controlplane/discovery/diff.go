package discovery

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

// ErrUnknownVersion is returned by Diff for a version the server does not keep.
var ErrUnknownVersion = fmt.Errorf("unknown version")

// SnapshotDiff is the semantic difference between two snapshots of one proxy.
type SnapshotDiff struct {
	NodeID string `json:"nodeId"`
	From   string `json:"from"`
	To     string `json:"to"`
	// Types lists, by type URL in a fixed order, the types that differ.
	Types []TypeDiff `json:"types"`
}

// TypeDiff is what differs in one resource type, by resource name.
type TypeDiff struct {
	TypeURL string           `json:"typeUrl"`
	Added   []string         `json:"added,omitempty"`
	Removed []string         `json:"removed,omitempty"`
	Changed []ResourceChange `json:"changed,omitempty"`
}

// ResourceChange is one resource present in both snapshots with different content.
type ResourceChange struct {
	Name   string        `json:"name"`
	Fields []FieldChange `json:"fields"`
}

// FieldChange is one changed leaf, named by its protojson path (list elements that
// carry a "name" are addressed by it: virtual_hosts[backend].routes[0].route.cluster).
// Old and New are JSON texts; "" means absent.
type FieldChange struct {
	Path string `json:"path"`
	Old  string `json:"old,omitempty"`
	New  string `json:"new,omitempty"`
}

// Diff compares the snapshots v1 and v2 of the proxy with node id node. An unknown
// version is an error wrapping ErrUnknownVersion that lists the versions kept.
func (s *Server) Diff(node, v1, v2 string) (SnapshotDiff, error) {
	a, b := s.history.find(node, v1), s.history.find(node, v2)
	for _, miss := range []struct {
		v    string
		snap *Snapshot
	}{{v1, a}, {v2, b}} {
		if miss.snap == nil {
			return SnapshotDiff{}, fmt.Errorf("diff %s: %w %q (kept: %s)", node, ErrUnknownVersion, miss.v,
				strings.Join(s.history.versions(node), ", "))
		}
	}
	return diffResources(node, v1, v2, a.res, b.res)
}

// typeOrder is the order types are shown in, as istioctl lists them.
var typeOrder = []resource.Type{
	resource.ListenerType, resource.RouteType, resource.ClusterType, resource.EndpointType, resource.SecretType,
}

func diffResources(node, v1, v2 string, a, b map[resource.Type][]types.Resource) (SnapshotDiff, error) {
	da, db := map[resource.Type]map[string]any{}, map[resource.Type]map[string]any{}
	for _, side := range []struct {
		in  map[resource.Type][]types.Resource
		out map[resource.Type]map[string]any
	}{{a, da}, {b, db}} {
		for t, rs := range side.in {
			m, err := byName(rs)
			if err != nil {
				return SnapshotDiff{NodeID: node, From: v1, To: v2, Types: []TypeDiff{}}, err
			}
			side.out[t] = m
		}
	}
	return DiffDecoded(node, v1, v2, da, db), nil
}

// DiffDecoded compares two configs of a proxy whose resources are already decoded to
// JSON values (protojson with proto field names), by type URL and resource name: Diff's
// comparison for configs read elsewhere, such as a cluster's Envoy config dump.
func DiffDecoded(node, from, to string, a, b map[resource.Type]map[string]any) SnapshotDiff {
	out := SnapshotDiff{NodeID: node, From: from, To: to, Types: []TypeDiff{}}
	typs := slices.Clone(typeOrder)
	for _, t := range slices.Sorted(maps.Keys(a)) {
		if !slices.Contains(typs, t) {
			typs = append(typs, t)
		}
	}
	for _, t := range slices.Sorted(maps.Keys(b)) {
		if !slices.Contains(typs, t) {
			typs = append(typs, t)
		}
	}
	for _, t := range typs {
		ra, rb := a[t], b[t]
		td := TypeDiff{TypeURL: t}
		for _, name := range slices.Sorted(maps.Keys(ra)) {
			if _, ok := rb[name]; !ok {
				td.Removed = append(td.Removed, name)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(rb)) {
			old, ok := ra[name]
			if !ok {
				td.Added = append(td.Added, name)
				continue
			}
			var fields []FieldChange
			diffValue("", old, rb[name], &fields)
			if len(fields) > 0 {
				td.Changed = append(td.Changed, ResourceChange{Name: name, Fields: fields})
			}
		}
		if td.Added != nil || td.Removed != nil || td.Changed != nil {
			out.Types = append(out.Types, td)
		}
	}
	return out
}

// byName decodes each resource's protojson into generic JSON values, by resource name.
func byName(rs []types.Resource) (map[string]any, error) {
	out := map[string]any{}
	for _, r := range rs {
		name := cachev3.GetResourceName(r)
		b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("marshal %s: %w", name, err)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, fmt.Errorf("decode %s: %w", name, err)
		}
		out[name] = v
	}
	return out, nil
}

// diffValue appends to out every leaf under path that differs between a and b.
func diffValue(path string, a, b any, out *[]FieldChange) {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := slices.Sorted(maps.Keys(av))
		for _, k := range slices.Sorted(maps.Keys(bv)) {
			if _, ok := av[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			diffValue(join(path, k), av[k], bv[k], out)
		}
		return
	case []any:
		bv, ok := b.([]any)
		if !ok {
			break
		}
		if named(av) && named(bv) {
			diffNamed(path, av, bv, out)
			return
		}
		for i := range max(len(av), len(bv)) {
			var x, y any
			if i < len(av) {
				x = av[i]
			}
			if i < len(bv) {
				y = bv[i]
			}
			diffValue(path+"["+strconv.Itoa(i)+"]", x, y, out)
		}
		return
	}
	ja, jb := jsonText(a), jsonText(b)
	if ja != jb {
		*out = append(*out, FieldChange{Path: path, Old: ja, New: jb})
	}
}

// diffNamed compares two lists whose elements all carry a unique "name", by name.
func diffNamed(path string, a, b []any, out *[]FieldChange) {
	index := func(l []any) ([]string, map[string]any) {
		var order []string
		m := map[string]any{}
		for _, e := range l {
			n := e.(map[string]any)["name"].(string)
			order = append(order, n)
			m[n] = e
		}
		return order, m
	}
	oa, ma := index(a)
	ob, mb := index(b)
	seen := map[string]bool{}
	for _, n := range append(oa, ob...) {
		if seen[n] {
			continue
		}
		seen[n] = true
		diffValue(path+"["+n+"]", ma[n], mb[n], out)
	}
}

// named reports whether every element of l is an object with a unique string "name".
func named(l []any) bool {
	if len(l) == 0 {
		return false
	}
	seen := map[string]bool{}
	for _, e := range l {
		m, ok := e.(map[string]any)
		if !ok {
			return false
		}
		n, ok := m["name"].(string)
		if !ok || seen[n] {
			return false
		}
		seen[n] = true
	}
	return true
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// jsonText is v as compact JSON, or "" for absent.
func jsonText(v any) string {
	if v == nil {
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
