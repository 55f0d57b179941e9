package fidelity

import (
	"fmt"
	"sort"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// difference is one place where meshlab's resource differs from istiod's: a field path
// inside a resource (or the whole resource) only istiod sets (missing), only meshlab
// sets (extra), or both set differently (changed).
type difference struct {
	Type, Name, Path, Kind string
}

func (d difference) String() string {
	p := d.Path
	if p == "" {
		p = "."
	}
	return fmt.Sprintf("%s %s %s %s", d.Type, d.Name, p, d.Kind)
}

// diffResources compares istiod's resources with meshlab's, by type, name and field
// path. A submessage or resource present on one side only is one difference, not one per
// field inside it.
func diffResources(istiod map[string]map[string]proto.Message, meshlab map[string]map[string]proto.Message) []difference {
	return diffTypes(typeOrder, istiod, meshlab)
}

// diffTypes is diffResources over the given types, in that order.
func diffTypes(types []string, istiod, meshlab map[string]map[string]proto.Message) []difference {
	var out []difference
	for _, typ := range types {
		short := shortNames[typ]
		names := map[string]bool{}
		for n := range istiod[typ] {
			names[n] = true
		}
		for n := range meshlab[typ] {
			names[n] = true
		}
		for _, n := range sortedKeys(names) {
			a, b := istiod[typ][n], meshlab[typ][n]
			switch {
			case b == nil:
				out = append(out, difference{short, n, "", "missing"})
			case a == nil:
				out = append(out, difference{short, n, "", "extra"})
			default:
				w := &differ{typ: short, name: n}
				w.message("", a.ProtoReflect(), b.ProtoReflect())
				out = append(out, w.out...)
			}
		}
	}
	return out
}

type differ struct {
	typ, name string
	out       []difference
}

func (w *differ) add(path, kind string) {
	w.out = append(w.out, difference{w.typ, w.name, path, kind})
}

// message compares two messages of one type field by field. Anys are compared by their
// unpacked contents when both carry the same type.
func (w *differ) message(path string, a, b protoreflect.Message) {
	if a.Descriptor().FullName() == "google.protobuf.Any" {
		w.any(path, a.Interface().(*anypb.Any), b.Interface().(*anypb.Any))
		return
	}
	fields := a.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		f := fields.Get(i)
		p := join(path, string(f.Name()))
		ha, hb := a.Has(f), b.Has(f)
		switch {
		case !ha && !hb:
		case !hb:
			w.add(p, "missing")
		case !ha:
			w.add(p, "extra")
		case f.IsList():
			w.list(p, f, a.Get(f).List(), b.Get(f).List())
		case f.IsMap():
			w.mapField(p, f, a.Get(f).Map(), b.Get(f).Map())
		case f.Message() != nil:
			w.message(p, a.Get(f).Message(), b.Get(f).Message())
		default:
			if !a.Get(f).Equal(b.Get(f)) {
				w.add(p, "changed")
			}
		}
	}
	if string(a.GetUnknown()) != string(b.GetUnknown()) {
		w.add(join(path, "<unknown fields>"), "changed")
	}
}

func (w *differ) any(path string, a, b *anypb.Any) {
	if a.GetTypeUrl() != b.GetTypeUrl() {
		w.add(join(path, "@type"), "changed")
		return
	}
	ma, errA := a.UnmarshalNew()
	mb, errB := b.UnmarshalNew()
	if errA != nil || errB != nil {
		if string(a.GetValue()) != string(b.GetValue()) {
			w.add(path, "changed")
		}
		return
	}
	w.message(path, ma.ProtoReflect(), mb.ProtoReflect())
}

// list matches elements by their name (or key) field when they have one, else by index.
func (w *differ) list(path string, f protoreflect.FieldDescriptor, a, b protoreflect.List) {
	if f.Message() == nil {
		if !listEqual(a, b) {
			w.add(path, "changed")
		}
		return
	}
	ka, kb := keyed(a), keyed(b)
	if ka == nil || kb == nil {
		n := max(a.Len(), b.Len())
		for i := range n {
			p := fmt.Sprintf("%s[%d]", path, i)
			switch {
			case i >= b.Len():
				w.add(p, "missing")
			case i >= a.Len():
				w.add(p, "extra")
			default:
				w.message(p, a.Get(i).Message(), b.Get(i).Message())
			}
		}
		return
	}
	keys := map[string]bool{}
	for k := range ka {
		keys[k] = true
	}
	for k := range kb {
		keys[k] = true
	}
	for _, k := range sortedKeys(keys) {
		p := fmt.Sprintf("%s[%s]", path, k)
		ea, eb := ka[k], kb[k]
		switch {
		case eb == nil:
			w.add(p, "missing")
		case ea == nil:
			w.add(p, "extra")
		default:
			w.message(p, ea, eb)
		}
	}
}

func (w *differ) mapField(path string, f protoreflect.FieldDescriptor, a, b protoreflect.Map) {
	keys := map[string]protoreflect.MapKey{}
	a.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool { keys[k.String()] = k; return true })
	b.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool { keys[k.String()] = k; return true })
	names := make([]string, 0, len(keys))
	for n := range keys {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		k := keys[n]
		p := fmt.Sprintf("%s[%s]", path, n)
		switch {
		case !b.Has(k):
			w.add(p, "missing")
		case !a.Has(k):
			w.add(p, "extra")
		case f.MapValue().Message() != nil:
			w.message(p, a.Get(k).Message(), b.Get(k).Message())
		case !a.Get(k).Equal(b.Get(k)):
			w.add(p, "changed")
		}
	}
}

// keyed indexes a list of messages by their "name" field (filter chains, filters,
// virtual hosts, routes...), or returns nil when an element has none or names repeat.
func keyed(l protoreflect.List) map[string]protoreflect.Message {
	out := map[string]protoreflect.Message{}
	for i := 0; i < l.Len(); i++ {
		m := l.Get(i).Message()
		f := m.Descriptor().Fields().ByName("name")
		if f == nil || f.Kind() != protoreflect.StringKind {
			return nil
		}
		n := m.Get(f).String()
		if n == "" {
			return nil
		}
		if _, dup := out[n]; dup {
			return nil
		}
		out[n] = m
	}
	return out
}

func listEqual(a, b protoreflect.List) bool {
	if a.Len() != b.Len() {
		return false
	}
	for i := 0; i < a.Len(); i++ {
		if !a.Get(i).Equal(b.Get(i)) {
			return false
		}
	}
	return true
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
