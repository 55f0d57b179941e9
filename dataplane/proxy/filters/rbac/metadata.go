package rbac

import (
	"fmt"

	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// valueMatch matches one metadata value; nil is a value that is not there.
type valueMatch func(*structpb.Value) bool

// compileMetadata compiles a MetadataMatcher as Envoy's Matchers::MetadataMatcher: the
// value at path inside the request's dynamic metadata of filter, matched by value and
// inverted by invert (a missing value is matched too, so an inverted matcher of a
// missing claim matches). Istio's request principals and claims arrive so, from
// envoy.filters.http.jwt_authn's payload.
func compileMetadata(m *matcherv3.MetadataMatcher) (matchFunc, error) {
	var path []string
	for i, seg := range m.GetPath() {
		k, ok := seg.GetSegment().(*matcherv3.MetadataMatcher_PathSegment_Key)
		if !ok {
			return nil, fmt.Errorf("path[%d]: only key segments are supported", i)
		}
		path = append(path, k.Key)
	}
	vm, err := compileValueMatcher(m.GetValue())
	if err != nil {
		return nil, fmt.Errorf("value.%w", err)
	}
	filter, invert := m.GetFilter(), m.GetInvert()
	return func(in *Input) bool {
		return vm(lookup(in.DynamicMetadata[filter], path)) != invert
	}, nil
}

// CompileMetadataMatcher compiles a MetadataMatcher for a match outside RBAC's rules (a
// route's dynamic_metadata, which Istio writes for a VirtualService's
// "@request.auth.claims..." header match): the result reports whether a request's
// dynamic metadata, by filter name, matches, as RBAC's metadata matchers do.
func CompileMetadataMatcher(m *matcherv3.MetadataMatcher) (func(map[string]*structpb.Struct) bool, error) {
	f, err := compileMetadata(m)
	if err != nil {
		return nil, err
	}
	return func(md map[string]*structpb.Struct) bool { return f(&Input{DynamicMetadata: md}) }, nil
}

func lookup(s *structpb.Struct, path []string) *structpb.Value {
	if s == nil || len(path) == 0 {
		return nil
	}
	v := s.GetFields()[path[0]]
	for _, k := range path[1:] {
		st := v.GetStructValue()
		if st == nil {
			return nil
		}
		v = st.GetFields()[k]
	}
	return v
}

func compileValueMatcher(m *matcherv3.ValueMatcher) (valueMatch, error) {
	switch p := m.GetMatchPattern().(type) {
	case *matcherv3.ValueMatcher_NullMatch_:
		return func(v *structpb.Value) bool { _, ok := v.GetKind().(*structpb.Value_NullValue); return ok }, nil
	case *matcherv3.ValueMatcher_StringMatch:
		sm, err := compileStringMatcher(p.StringMatch)
		if err != nil {
			return nil, fmt.Errorf("string_match.%w", err)
		}
		return func(v *structpb.Value) bool {
			s, ok := v.GetKind().(*structpb.Value_StringValue)
			return ok && sm(s.StringValue)
		}, nil
	case *matcherv3.ValueMatcher_BoolMatch:
		want := p.BoolMatch
		return func(v *structpb.Value) bool {
			b, ok := v.GetKind().(*structpb.Value_BoolValue)
			return ok && b.BoolValue == want
		}, nil
	case *matcherv3.ValueMatcher_PresentMatch:
		want := p.PresentMatch
		return func(v *structpb.Value) bool { return want && v.GetKind() != nil }, nil
	case *matcherv3.ValueMatcher_ListMatch:
		one, ok := p.ListMatch.GetMatchPattern().(*matcherv3.ListMatcher_OneOf)
		if !ok {
			return nil, fmt.Errorf("list_match: only one_of is supported")
		}
		em, err := compileValueMatcher(one.OneOf)
		if err != nil {
			return nil, fmt.Errorf("list_match.one_of.%w", err)
		}
		return func(v *structpb.Value) bool {
			for _, e := range v.GetListValue().GetValues() {
				if em(e) {
					return true
				}
			}
			return false
		}, nil
	case *matcherv3.ValueMatcher_OrMatch:
		var ms []valueMatch
		for i, c := range p.OrMatch.GetValueMatchers() {
			cm, err := compileValueMatcher(c)
			if err != nil {
				return nil, fmt.Errorf("or_match.value_matchers[%d].%w", i, err)
			}
			ms = append(ms, cm)
		}
		return func(v *structpb.Value) bool {
			for _, m := range ms {
				if m(v) {
					return true
				}
			}
			return false
		}, nil
	}
	return nil, fmt.Errorf("match_pattern: %T is not supported by meshlab proxy", m.GetMatchPattern())
}
