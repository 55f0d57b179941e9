// Package fieldcheck refuses configuration that sets fields the proxy does not implement.
//
// Envoy fails on configuration it cannot honour; a stand-in that silently ignored a field
// would behave differently from Envoy without saying so. An Allow lists, per message type,
// the fields the proxy implements; Check walks a message and names the first field that
// is set but not listed.
package fieldcheck

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Allow maps a message's full name to the names of its fields the proxy implements.
// Messages whose type is not a key are accepted whole (durations, structs, addresses of
// well-known types); list every message type whose fields matter.
type Allow map[protoreflect.FullName][]string

// Merge returns a new Allow holding the entries of a and others. It shares their field
// lists, copying one only where two Allows list the same message: Allows are never
// modified, and merges run at package init in every process of the binary
// (initcost_test.go), where a copy of every list cost a thousand allocations.
func (a Allow) Merge(others ...Allow) Allow {
	n := len(a)
	for _, m := range others {
		n += len(m)
	}
	out := make(Allow, n)
	for _, m := range append([]Allow{a}, others...) {
		for k, v := range m {
			if prev, ok := out[k]; ok {
				v = append(slices.Clip(prev), v...)
			}
			out[k] = v
		}
	}
	return out
}

// UnsupportedError names a field that is set but not implemented.
type UnsupportedError struct {
	Path string // e.g. "filter_chains[0].filter_chain_match.server_names"
}

// Error names the field.
func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("%s: field is not supported by meshlab proxy", e.Path)
}

// Check returns an *UnsupportedError for the first (in declaration order, depth first)
// field of m that is set but not allowed.
//
// It runs on every resource a proxy applies. A first walk asks each listed message only
// about the fields it refuses and the message fields it allows, with a's lists compiled
// once per message type (rules); only when that walk finds a refused field does a
// second one, over the fields that are set in declaration order, spell its path. An
// Allow is a package variable, never changed once used: its compiled rules are kept for
// the process's life.
func (a Allow) Check(m proto.Message) error {
	return a.CheckExcept(m, "")
}

// CheckExcept is Check without the field named skip of m itself (not of the messages in
// it): a caller that checked that field's values on their own checks the rest with it.
func (a Allow) CheckExcept(m proto.Message, skip protoreflect.Name) error {
	if m == nil {
		return nil
	}
	pm := m.ProtoReflect()
	if a.rules().accepts(pm, skip) {
		return nil
	}
	c := &checker{allow: a, skip: skip}
	c.collect = func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		if !fd.IsExtension() {
			c.set = append(c.set, fd)
		}
		return true
	}
	if c.check(pm) {
		return &UnsupportedError{Path: c.path()}
	}
	return nil
}

// rules is an Allow compiled for the first walk, one message type at a time, when a
// check first meets it. Safe for concurrent use.
type rules struct {
	allow  Allow
	byType sync.Map // protoreflect.MessageDescriptor -> *typeRules
}

// typeRules is what the first walk asks of a message of one type.
type typeRules struct {
	listed  bool                           // the type is a key of the Allow: its fields are checked
	refused []protoreflect.FieldDescriptor // fields not allowed: refused when set
	walk    []protoreflect.FieldDescriptor // allowed fields holding messages (singular, list, map of messages)
	wire    map[protowire.Number]wireField // every field, by number, for AcceptsEncoding
}

// wireField is what AcceptsEncoding asks of one field of a listed type.
type wireField struct {
	name    protoreflect.Name
	refused bool
	msg     protoreflect.MessageDescriptor // the message it holds (a map's value), to walk into; nil for none
	isMap   bool
}

// AcceptsEncoding reports whether b, the encoding of a message of type md, holds no
// field a refuses, leaving out the field named skip of the message itself. It reads
// the field numbers off the wire, which touches far less memory than Check's walk of
// the decoded message: a proxy that applies one changed virtual host after idling pays
// mostly for the cache misses of that walk. True means Check of the decoded message
// accepts it too (a field that is set is on the wire); false means a field on the wire
// is refused or the encoding was not read: Check of the decoded message then decides
// (a field encoded with its default value is on the wire but not set) and names it.
func (a Allow) AcceptsEncoding(md protoreflect.MessageDescriptor, b []byte, skip protoreflect.Name) bool {
	return a.rules().acceptsWire(md, b, skip)
}

func (r *rules) acceptsWire(md protoreflect.MessageDescriptor, b []byte, skip protoreflect.Name) bool {
	tr := r.of(md)
	if !tr.listed {
		return true
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return false
		}
		val := b[n : n+m]
		b = b[n+m:]
		wf, declared := tr.wire[num]
		if !declared || wf.name == skip { // unknown fields and extensions are not checked
			continue
		}
		if wf.refused {
			return false
		}
		if wf.msg == nil {
			continue
		}
		if typ != protowire.BytesType {
			return false // a group: Check decides
		}
		v, _ := protowire.ConsumeBytes(val)
		if wf.isMap {
			if !r.acceptsMapEntry(wf.msg, v) {
				return false
			}
			continue
		}
		if !r.acceptsWire(wf.msg, v, "") {
			return false
		}
	}
	return true
}

// acceptsMapEntry is acceptsWire of the value (field 2) of a map entry's encoding.
func (r *rules) acceptsMapEntry(value protoreflect.MessageDescriptor, b []byte) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return false
		}
		if num == 2 {
			if typ != protowire.BytesType {
				return false
			}
			v, _ := protowire.ConsumeBytes(b[n : n+m])
			if !r.acceptsWire(value, v, "") {
				return false
			}
		}
		b = b[n+m:]
	}
	return true
}

// compiled holds the rules of each Allow checked so far, by the Allow's map.
var compiled sync.Map // unsafe.Pointer -> *rules

// rules returns a's compiled rules, made on a's first check.
func (a Allow) rules() *rules {
	key := reflect.ValueOf(a).UnsafePointer()
	if r, ok := compiled.Load(key); ok {
		return r.(*rules)
	}
	r, _ := compiled.LoadOrStore(key, &rules{allow: a})
	return r.(*rules)
}

// of returns the rules of messages of type md.
func (r *rules) of(md protoreflect.MessageDescriptor) *typeRules {
	if tr, ok := r.byType.Load(md); ok {
		return tr.(*typeRules)
	}
	tr := &typeRules{}
	allowed, listed := r.allow[md.FullName()]
	if listed {
		tr.listed = true
		fields := md.Fields()
		tr.wire = make(map[protowire.Number]wireField, fields.Len())
		for i := range fields.Len() {
			fd := fields.Get(i)
			wf := wireField{name: fd.Name()}
			switch {
			case !slices.Contains(allowed, string(fd.Name())):
				tr.refused = append(tr.refused, fd)
				wf.refused = true
			case fd.IsMap():
				if fd.MapValue().Kind() == protoreflect.MessageKind {
					tr.walk = append(tr.walk, fd)
					wf.msg, wf.isMap = fd.MapValue().Message(), true
				}
			case fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind:
				tr.walk = append(tr.walk, fd)
				wf.msg = fd.Message()
			}
			tr.wire[fd.Number()] = wf
		}
	}
	got, _ := r.byType.LoadOrStore(md, tr)
	return got.(*typeRules)
}

// accepts reports whether m, and every message in it, sets no field its type's rules
// refuse, leaving out the field named skip of m itself.
func (r *rules) accepts(m protoreflect.Message, skip protoreflect.Name) bool {
	tr := r.of(m.Descriptor())
	if !tr.listed {
		return true
	}
	for _, fd := range tr.refused {
		if m.Has(fd) && fd.Name() != skip {
			return false
		}
	}
	for _, fd := range tr.walk {
		if !m.Has(fd) || fd.Name() == skip {
			continue
		}
		v := m.Get(fd)
		switch {
		case fd.IsList():
			l := v.List()
			for j := range l.Len() {
				if !r.accepts(l.Get(j).Message(), "") {
					return false
				}
			}
		case fd.IsMap():
			ok := true
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				ok = r.accepts(mv.Message(), "")
				return ok
			})
			if !ok {
				return false
			}
		default:
			if !r.accepts(v.Message(), "") {
				return false
			}
		}
	}
	return true
}

// step is one element of the path from the checked message to a field: the field, and
// which element of it when it is a list (index) or a map (key).
type step struct {
	fd    protoreflect.FieldDescriptor
	index int // list element, -1 for none
	key   protoreflect.MapKey
	isKey bool
}

// checker walks a message; steps lead to the field being looked at.
type checker struct {
	allow Allow
	skip  protoreflect.Name // a field of the checked message itself not to check
	steps []step
	// set holds the set fields of the messages being walked, innermost last; collect
	// appends to it (one closure for the whole walk).
	set     []protoreflect.FieldDescriptor
	collect func(protoreflect.FieldDescriptor, protoreflect.Value) bool
}

// check reports whether m holds a field that is set but not allowed, leaving c.steps at
// that field.
func (c *checker) check(m protoreflect.Message) bool {
	allowed, listed := c.allow[m.Descriptor().FullName()]
	if !listed {
		return false
	}
	// The fields that are set, in declaration order (Range's order is unspecified).
	start := len(c.set)
	m.Range(c.collect)
	defer func() { c.set = c.set[:start] }()
	slices.SortFunc(c.set[start:], func(x, y protoreflect.FieldDescriptor) int { return x.Index() - y.Index() })
	top := len(c.steps) == 0
	for i := start; i < len(c.set); i++ {
		fd := c.set[i]
		if top && fd.Name() == c.skip {
			continue
		}
		c.steps = append(c.steps, step{fd: fd, index: -1})
		if !slices.Contains(allowed, string(fd.Name())) {
			return true
		}
		if fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind {
			if c.checkValue(fd, m.Get(fd)) {
				return true
			}
		}
		c.steps = c.steps[:len(c.steps)-1]
	}
	return false
}

// checkValue checks the message, list or map value of a message field whose step is the
// last of c.steps.
func (c *checker) checkValue(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
	last := len(c.steps) - 1
	switch {
	case fd.IsList():
		l := v.List()
		for j := 0; j < l.Len(); j++ {
			c.steps[last].index = j
			if c.check(l.Get(j).Message()) {
				return true
			}
		}
		c.steps[last].index = -1
	case fd.IsMap():
		if fd.MapValue().Kind() != protoreflect.MessageKind {
			return false
		}
		found := false
		v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
			c.steps[last].key, c.steps[last].isKey = k, true
			found = c.check(mv.Message())
			return !found
		})
		if !found {
			c.steps[last].isKey = false
		}
		return found
	default:
		return c.check(v.Message())
	}
	return false
}

// path spells c.steps as "filter_chains[1].filter_chain_match.server_names".
func (c *checker) path() string {
	var b strings.Builder
	for i, s := range c.steps {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(string(s.fd.Name()))
		switch {
		case s.isKey:
			fmt.Fprintf(&b, "[%v]", s.key.Interface())
		case s.index >= 0:
			fmt.Fprintf(&b, "[%d]", s.index)
		}
	}
	return b.String()
}
