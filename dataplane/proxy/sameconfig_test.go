package proxy

import (
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestSameConfigIsProtoEqual: sameConfig answers as proto.Equal on route configurations
// that share virtual hosts, change one, add one, or differ outside them.
func TestSameConfigIsProtoEqual(t *testing.T) {
	t.Parallel()
	vh := func(name string) *routev3.VirtualHost {
		return &routev3.VirtualHost{Name: name, Domains: []string{name, name + ":80"}}
	}
	a, b := vh("a"), vh("b")
	base := &routev3.RouteConfiguration{Name: "80", VirtualHosts: []*routev3.VirtualHost{a, b}}
	withUnknown := &routev3.RouteConfiguration{Name: "80", VirtualHosts: []*routev3.VirtualHost{a, b}}
	withUnknown.ProtoReflect().SetUnknown([]byte{0xf8, 0x3, 0x1}) // field 63, varint 1
	for _, tc := range []struct {
		name string
		y    *routev3.RouteConfiguration
	}{
		{"itself", base},
		{"the same hosts shared", &routev3.RouteConfiguration{Name: "80", VirtualHosts: []*routev3.VirtualHost{a, b}}},
		{"the same hosts copied", &routev3.RouteConfiguration{Name: "80", VirtualHosts: []*routev3.VirtualHost{vh("a"), vh("b")}}},
		{"one host changed", &routev3.RouteConfiguration{Name: "80", VirtualHosts: []*routev3.VirtualHost{a, vh("c")}}},
		{"one host added", &routev3.RouteConfiguration{Name: "80", VirtualHosts: []*routev3.VirtualHost{a, b, vh("c")}}},
		{"one host removed", &routev3.RouteConfiguration{Name: "80", VirtualHosts: []*routev3.VirtualHost{a}}},
		{"another name", &routev3.RouteConfiguration{Name: "81", VirtualHosts: []*routev3.VirtualHost{a, b}}},
		{"a field more", &routev3.RouteConfiguration{Name: "80", VirtualHosts: []*routev3.VirtualHost{a, b}, ValidateClusters: wrapperspb.Bool(false)}},
		{"no hosts", &routev3.RouteConfiguration{Name: "80"}},
		{"an unknown field", withUnknown},
		{"nil", nil},
	} {
		var y proto.Message
		if tc.y != nil {
			y = tc.y
		}
		if got, want := sameConfig(base, y), proto.Equal(base, y); got != want {
			t.Errorf("%s: sameConfig %v, proto.Equal %v", tc.name, got, want)
		}
		if y != nil {
			if got, want := sameConfig(y, base), proto.Equal(y, base); got != want {
				t.Errorf("%s, swapped: sameConfig %v, proto.Equal %v", tc.name, got, want)
			}
		}
	}
}
