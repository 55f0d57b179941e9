// Package fieldcheck refuses configuration that sets fields the proxy does not implement.
//
// Envoy fails on configuration it cannot honour; a stand-in that silently ignored a field
// would behave differently from Envoy without saying so. An Allow lists, per message type,
// the fields the proxy implements; Check walks a message and names the first field that
// is set but not listed.
package fieldcheck

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Allow maps a message's full name to the names of its fields the proxy implements.
// Messages whose type is not a key are accepted whole (durations, structs, addresses of
// well-known types); list every message type whose fields matter.
type Allow map[protoreflect.FullName][]string

// Merge returns a new Allow holding the entries of a and others.
func (a Allow) Merge(others ...Allow) Allow {
	out := Allow{}
	for _, m := range append([]Allow{a}, others...) {
		for k, v := range m {
			out[k] = append(out[k], v...)
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
// It runs on every resource a proxy applies, so it visits only the fields that are set
// and spells a field's path only for the one it refuses.
func (a Allow) Check(m proto.Message) error {
	return a.CheckExcept(m, "")
}

// CheckExcept is Check without the field named skip of m itself (not of the messages in
// it): a caller that checked that field's values on their own checks the rest with it.
func (a Allow) CheckExcept(m proto.Message, skip protoreflect.Name) error {
	if m == nil {
		return nil
	}
	c := &checker{allow: a, skip: skip}
	c.collect = func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		if !fd.IsExtension() {
			c.set = append(c.set, fd)
		}
		return true
	}
	if c.check(m.ProtoReflect()) {
		return &UnsupportedError{Path: c.path()}
	}
	return nil
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
