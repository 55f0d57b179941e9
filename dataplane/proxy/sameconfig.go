package proxy

import (
	"bytes"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// sameConfig reports whether x and y are equal as proto.Equal decides it, taking two
// elements of a repeated message field that are one message (the same pointer) as equal
// without walking them.
//
// Server.record asks it whether a resource changed, for /config_dump's versions. The
// route cache (httpconn.RouteCache) shares the decoded message of every virtual host
// whose encoding did not change, so of a route configuration with one changed virtual
// host, of fifty, only that one is compared: proto.Equal walked all fifty, on each push
// and in every proxy of the lab (issue 30).
func sameConfig(x, y proto.Message) bool {
	if x == nil || y == nil {
		return x == nil && y == nil
	}
	mx, my := x.ProtoReflect(), y.ProtoReflect()
	if mx.Descriptor() != my.Descriptor() || mx.IsValid() != my.IsValid() || !bytes.Equal(mx.GetUnknown(), my.GetUnknown()) {
		return false
	}
	set, same := 0, true
	mx.Range(func(fd protoreflect.FieldDescriptor, vx protoreflect.Value) bool {
		set++
		if !my.Has(fd) {
			same = false
			return false
		}
		vy := my.Get(fd)
		if !fd.IsList() || fd.Message() == nil {
			same = vx.Equal(vy)
			return same
		}
		lx, ly := vx.List(), vy.List()
		if lx.Len() != ly.Len() {
			same = false
			return false
		}
		for i := range lx.Len() {
			ex, ey := lx.Get(i).Message().Interface(), ly.Get(i).Message().Interface()
			if ex != ey && !proto.Equal(ex, ey) {
				same = false
				return false
			}
		}
		return true
	})
	if !same {
		return false
	}
	my.Range(func(protoreflect.FieldDescriptor, protoreflect.Value) bool {
		set--
		return true
	})
	return set == 0
}
