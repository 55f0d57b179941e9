package fidelity

import (
	"fmt"
	"sort"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// schemaDiffs compares two proto files that describe the same wire schema (meshlab's
// ambientapi copy and Istio's own) by what reaches the wire: every message and enum
// declared in them, by full name; a message's fields by number, each with its name,
// kind, cardinality, the full name of its message or enum type, its oneof and whether it
// is a map; an enum's values by number, each with its name. It returns one line per
// difference, sorted, "" meaning "only in Istio's" and "only in meshlab's" for missing
// declarations. Comments, options and Go packages are not compared.
func schemaDiffs(istio, ours protoreflect.FileDescriptor) []string {
	if istio.Package() != ours.Package() {
		return []string{fmt.Sprintf("package %s, Istio's is %s", ours.Package(), istio.Package())}
	}
	a, b := declarations(istio), declarations(ours)
	var out []string
	for _, name := range unionKeys(a, b) {
		da, db := a[name], b[name]
		switch {
		case db == nil:
			out = append(out, fmt.Sprintf("%s: only in Istio's", name))
		case da == nil:
			out = append(out, fmt.Sprintf("%s: only in meshlab's", name))
		default:
			out = append(out, compareDeclaration(name, da, db)...)
		}
	}
	sort.Strings(out)
	return out
}

// declarations indexes every message and enum of a file, nested ones included, by full
// name. Map entry messages are left out: they are compared as their map field.
func declarations(f protoreflect.FileDescriptor) map[string]protoreflect.Descriptor {
	out := map[string]protoreflect.Descriptor{}
	var walk func(ms protoreflect.MessageDescriptors, es protoreflect.EnumDescriptors)
	walk = func(ms protoreflect.MessageDescriptors, es protoreflect.EnumDescriptors) {
		for i := 0; i < es.Len(); i++ {
			out[string(es.Get(i).FullName())] = es.Get(i)
		}
		for i := 0; i < ms.Len(); i++ {
			m := ms.Get(i)
			if m.IsMapEntry() {
				continue
			}
			out[string(m.FullName())] = m
			walk(m.Messages(), m.Enums())
		}
	}
	walk(f.Messages(), f.Enums())
	return out
}

func compareDeclaration(name string, a, b protoreflect.Descriptor) []string {
	switch da := a.(type) {
	case protoreflect.MessageDescriptor:
		db, ok := b.(protoreflect.MessageDescriptor)
		if !ok {
			return []string{fmt.Sprintf("%s: a message in Istio's, not in meshlab's", name)}
		}
		return compareFields(name, da, db)
	case protoreflect.EnumDescriptor:
		db, ok := b.(protoreflect.EnumDescriptor)
		if !ok {
			return []string{fmt.Sprintf("%s: an enum in Istio's, not in meshlab's", name)}
		}
		return compareValues(name, da, db)
	}
	return nil
}

func compareFields(name string, a, b protoreflect.MessageDescriptor) []string {
	fa, fb := fieldsByNumber(a), fieldsByNumber(b)
	nums := map[string]bool{}
	for n := range fa {
		nums[n] = true
	}
	for n := range fb {
		nums[n] = true
	}
	var out []string
	for _, n := range sortedKeys(nums) {
		x, y := fa[n], fb[n]
		switch {
		case y == nil:
			out = append(out, fmt.Sprintf("%s field %s (%s): only in Istio's", name, n, x.Name()))
		case x == nil:
			out = append(out, fmt.Sprintf("%s field %s (%s): only in meshlab's", name, n, y.Name()))
		default:
			if sx, sy := fieldShape(x), fieldShape(y); sx != sy {
				out = append(out, fmt.Sprintf("%s field %s: Istio's %s, meshlab's %s", name, n, sx, sy))
			}
		}
	}
	return out
}

func fieldsByNumber(m protoreflect.MessageDescriptor) map[string]protoreflect.FieldDescriptor {
	out := map[string]protoreflect.FieldDescriptor{}
	fs := m.Fields()
	for i := 0; i < fs.Len(); i++ {
		out[fmt.Sprint(fs.Get(i).Number())] = fs.Get(i)
	}
	return out
}

// fieldShape is everything about a field that the wire or the JSON form depends on.
func fieldShape(f protoreflect.FieldDescriptor) string {
	s := fmt.Sprintf("%s %s %s", f.Name(), f.Cardinality(), kindName(f))
	if f.IsMap() {
		s = fmt.Sprintf("%s map<%s, %s>", f.Name(), kindName(f.MapKey()), kindName(f.MapValue()))
	}
	if o := f.ContainingOneof(); o != nil && !o.IsSynthetic() {
		s += " in oneof " + string(o.Name())
	}
	if f.HasPresence() {
		s += " with presence"
	}
	if f.IsPacked() {
		s += " packed"
	}
	return s
}

func kindName(f protoreflect.FieldDescriptor) string {
	switch {
	case f.Message() != nil:
		return string(f.Message().FullName())
	case f.Enum() != nil:
		return "enum " + string(f.Enum().FullName())
	}
	return f.Kind().String()
}

func compareValues(name string, a, b protoreflect.EnumDescriptor) []string {
	va, vb := valuesByNumber(a), valuesByNumber(b)
	nums := map[string]bool{}
	for n := range va {
		nums[n] = true
	}
	for n := range vb {
		nums[n] = true
	}
	var out []string
	for _, n := range sortedKeys(nums) {
		x, y := va[n], vb[n]
		switch {
		case y == "":
			out = append(out, fmt.Sprintf("%s value %s (%s): only in Istio's", name, n, x))
		case x == "":
			out = append(out, fmt.Sprintf("%s value %s (%s): only in meshlab's", name, n, y))
		case x != y:
			out = append(out, fmt.Sprintf("%s value %s: Istio's %s, meshlab's %s", name, n, x, y))
		}
	}
	return out
}

func valuesByNumber(e protoreflect.EnumDescriptor) map[string]string {
	out := map[string]string{}
	vs := e.Values()
	for i := 0; i < vs.Len(); i++ {
		out[fmt.Sprint(vs.Get(i).Number())] = string(vs.Get(i).Name())
	}
	return out
}

func unionKeys[V any](a, b map[string]V) []string {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	return sortedKeys(keys)
}
