// Package fieldcheck refuses configuration that sets fields the proxy does not implement.
//
// Envoy fails on configuration it cannot honour; a stand-in that silently ignored a field
// would behave differently from Envoy without saying so. An Allow lists, per message type,
// the fields the proxy implements; Check walks a message and names the first field that
// is set but not listed.
package fieldcheck

import (
	"fmt"

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

// Check returns an *UnsupportedError for the first (in field-number order, depth first)
// field of m that is set but not allowed.
func (a Allow) Check(m proto.Message) error {
	if m == nil {
		return nil
	}
	return a.check(m.ProtoReflect(), "")
}

func (a Allow) check(m protoreflect.Message, path string) error {
	allowed, listed := a[m.Descriptor().FullName()]
	if !listed {
		return nil
	}
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if !m.Has(fd) {
			continue
		}
		p := join(path, string(fd.Name()))
		if !contains(allowed, string(fd.Name())) {
			return &UnsupportedError{Path: p}
		}
		if fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind {
			continue
		}
		v := m.Get(fd)
		switch {
		case fd.IsList():
			l := v.List()
			for j := 0; j < l.Len(); j++ {
				if err := a.check(l.Get(j).Message(), fmt.Sprintf("%s[%d]", p, j)); err != nil {
					return err
				}
			}
		case fd.IsMap():
			if fd.MapValue().Kind() != protoreflect.MessageKind {
				continue
			}
			var err error
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				err = a.check(mv.Message(), fmt.Sprintf("%s[%v]", p, k.Interface()))
				return err == nil
			})
			if err != nil {
				return err
			}
		default:
			if err := a.check(v.Message(), p); err != nil {
				return err
			}
		}
	}
	return nil
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
