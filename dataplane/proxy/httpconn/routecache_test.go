package httpconn

import (
	"fmt"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func encodeRoutes(t *testing.T, rc *routev3.RouteConfiguration) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// decodeCompile runs a configuration through the cache as the proxy's RDS apply does.
func decodeCompile(t *testing.T, c *RouteCache, rc *routev3.RouteConfiguration) (*routev3.RouteConfiguration, *RouteTable) {
	t.Helper()
	got := c.Decode(encodeRoutes(t, rc))
	if got == nil {
		t.Fatal("Decode refused a valid configuration")
	}
	if !proto.Equal(got, rc) {
		t.Fatalf("Decode = %v, want %v", got, rc)
	}
	table, err := c.Compile(got)
	if err != nil {
		t.Fatal(err)
	}
	return got, table
}

func TestRouteCacheReusesTheVirtualHostsThatDidNotChange(t *testing.T) {
	c := NewRouteCache()
	rc := &routev3.RouteConfiguration{Name: "8080", ValidateClusters: wrapperspb.Bool(false), VirtualHosts: []*routev3.VirtualHost{
		vh("frontend", "frontend", "frontend:8080"), vh("backend", "backend", "backend:8080"), vh("allow_any", "*"),
	}}
	msg1, t1 := decodeCompile(t, c, rc)

	// backend's virtual host changes; frontend's and allow_any's do not.
	rc2 := proto.Clone(rc).(*routev3.RouteConfiguration)
	rc2.VirtualHosts[1].Routes[0].GetRoute().ClusterSpecifier = &routev3.RouteAction_Cluster{Cluster: "backend-v2"}
	msg2, t2 := decodeCompile(t, c, rc2)
	if msg2.VirtualHosts[0] != msg1.VirtualHosts[0] || msg2.VirtualHosts[2] != msg1.VirtualHosts[2] {
		t.Error("an unchanged virtual host was decoded again")
	}
	if msg2.VirtualHosts[1] == msg1.VirtualHosts[1] {
		t.Error("the changed virtual host is the old message")
	}
	if t2.vhostOrder[0] != t1.vhostOrder[0] || t2.vhostOrder[2] != t1.vhostOrder[2] {
		t.Error("an unchanged virtual host was compiled again")
	}
	if t2.vhostOrder[1] == t1.vhostOrder[1] {
		t.Error("the changed virtual host is the old compile")
	}
	for host, want := range map[string]string{"backend": "backend-v2", "frontend:8080": "frontend", "other": "allow_any"} {
		if _, r := t2.Match(host, "/"); r == nil || r.Cluster != want {
			t.Errorf("Match(%q) = %v, want cluster %s", host, r, want)
		}
	}

	// A virtual host added first moves every other by one: each is still reused.
	rcAdded := proto.Clone(rc2).(*routev3.RouteConfiguration)
	rcAdded.VirtualHosts = append([]*routev3.VirtualHost{vh("added", "added")}, rcAdded.VirtualHosts...)
	msgAdded, tAdded := decodeCompile(t, c, rcAdded)
	for i := range msg2.VirtualHosts {
		if msgAdded.VirtualHosts[i+1] != msg2.VirtualHosts[i] || tAdded.vhostOrder[i+1] != t2.vhostOrder[i] {
			t.Errorf("virtual host %d, moved by one, was decoded or compiled again", i)
		}
	}
	// Removed again: the others move back and are reused.
	msgBack, tBack := decodeCompile(t, c, rc2)
	for i := range msg2.VirtualHosts {
		if msgBack.VirtualHosts[i] != msg2.VirtualHosts[i] || tBack.vhostOrder[i] != t2.vhostOrder[i] {
			t.Errorf("virtual host %d, moved back, was decoded or compiled again", i)
		}
	}

	// Another body limit compiles every virtual host again.
	rc3 := proto.Clone(rc2).(*routev3.RouteConfiguration)
	rc3.MaxDirectResponseBodySizeBytes = wrapperspb.UInt32(100)
	_, t3 := decodeCompile(t, c, rc3)
	for i := range t3.vhostOrder {
		if t3.vhostOrder[i] == t2.vhostOrder[i] {
			t.Errorf("virtual host %d kept its compile under another body limit", i)
		}
	}
}

// TestRouteCacheSharesTheExactDomainsWhileTheyDoNotChange: a compile whose virtual hosts
// have the last compile's domains, one by one, shares its table's exact-domain map; one
// whose domains changed builds its own, and the last table's map is left as it was.
func TestRouteCacheSharesTheExactDomainsWhileTheyDoNotChange(t *testing.T) {
	c := NewRouteCache()
	rc := &routev3.RouteConfiguration{Name: "8080", VirtualHosts: []*routev3.VirtualHost{
		vh("frontend", "frontend", "Frontend:8080"), vh("backend", "backend", "backend:8080"), vh("wild", "*.wild", "pre.*"), vh("allow_any", "*"),
	}}
	_, t1 := decodeCompile(t, c, rc)
	same := func(a, b *RouteTable) bool { return fmt.Sprintf("%p", a.exact) == fmt.Sprintf("%p", b.exact) }
	match := func(name string, tb *RouteTable, want map[string]string) {
		t.Helper()
		for host, cluster := range want {
			if _, r := tb.Match(host, "/"); r == nil || r.Cluster != cluster {
				t.Errorf("%s: Match(%q) = %v, want cluster %s", name, host, r, cluster)
			}
		}
	}

	rc2 := proto.Clone(rc).(*routev3.RouteConfiguration)
	rc2.VirtualHosts[1].Routes[0].GetRoute().ClusterSpecifier = &routev3.RouteAction_Cluster{Cluster: "backend-v2"}
	_, t2 := decodeCompile(t, c, rc2)
	if !same(t1, t2) {
		t.Error("a route changed, the domains did not: the exact-domain map was built again")
	}
	match("one route changed", t2, map[string]string{"backend": "backend-v2", "frontend:8080": "frontend", "x.wild": "wild", "pre.x": "wild", "other": "allow_any"})
	match("the last table", t1, map[string]string{"backend": "backend", "frontend:8080": "frontend"})

	rc3 := proto.Clone(rc2).(*routev3.RouteConfiguration)
	rc3.VirtualHosts[1].Domains = append(rc3.VirtualHosts[1].Domains, "backend.default")
	_, t3 := decodeCompile(t, c, rc3)
	if same(t2, t3) {
		t.Error("a domain was added, the exact-domain map was shared")
	}
	match("a domain added", t3, map[string]string{"backend.default": "backend-v2", "backend": "backend-v2", "frontend:8080": "frontend"})
	match("the last table", t2, map[string]string{"backend.default": "allow_any"})

	rc4 := proto.Clone(rc3).(*routev3.RouteConfiguration)
	rc4.VirtualHosts = append([]*routev3.VirtualHost{vh("added", "added")}, rc4.VirtualHosts...)
	_, t4 := decodeCompile(t, c, rc4)
	if same(t3, t4) {
		t.Error("a virtual host was added, the exact-domain map was shared")
	}
	match("a virtual host added", t4, map[string]string{"added": "added", "backend.default": "backend-v2", "frontend:8080": "frontend", "x.wild": "wild"})

	// A duplicate domain is still refused.
	rc5 := proto.Clone(rc4).(*routev3.RouteConfiguration)
	rc5.VirtualHosts[0].Domains = []string{"*.wild"}
	if got := c.Decode(encodeRoutes(t, rc5)); got == nil {
		t.Fatal("Decode refused a valid configuration")
	} else if _, err := c.Compile(got); err == nil || !strings.Contains(err.Error(), "Duplicate entry of domain *.wild") {
		t.Errorf("Compile of a duplicate wildcard domain: %v", err)
	}
}

// A configuration the cache cannot take whole is refused by the whole decode or compile,
// with the same words as without the cache.
func TestRouteCacheRefusesAsCompileRoutes(t *testing.T) {
	c := NewRouteCache()
	good := &routev3.RouteConfiguration{Name: "80", VirtualHosts: []*routev3.VirtualHost{vh("a", "a"), vh("b", "b")}}
	decodeCompile(t, c, good)

	if c.Decode([]byte{0xff}) != nil {
		t.Error("Decode took a malformed encoding")
	}
	invalid := proto.Clone(good).(*routev3.RouteConfiguration)
	invalid.VirtualHosts[1].Name = "" // required
	if c.Decode(encodeRoutes(t, invalid)) != nil {
		t.Error("Decode took a virtual host without a name")
	}

	for name, change := range map[string]func(rc *routev3.RouteConfiguration){
		"an unimplemented field of a new virtual host": func(rc *routev3.RouteConfiguration) {
			rc.VirtualHosts[1].RequireTls = routev3.VirtualHost_ALL
		},
		"an unimplemented field of the configuration": func(rc *routev3.RouteConfiguration) {
			rc.ResponseHeadersToAdd = []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x", Value: "y"}}}
		},
		"a domain twice": func(rc *routev3.RouteConfiguration) {
			rc.VirtualHosts[1].Domains = []string{"a"}
		},
		"a direct response over the limit": func(rc *routev3.RouteConfiguration) {
			rc.MaxDirectResponseBodySizeBytes = wrapperspb.UInt32(1)
			rc.VirtualHosts[1].Routes[0].Action = &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{
				Status: 200, Body: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "too long"}},
			}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			rc := proto.Clone(good).(*routev3.RouteConfiguration)
			change(rc)
			_, want := CompileRoutes(rc)
			if want == nil {
				t.Fatal("CompileRoutes took it")
			}
			msg := c.Decode(encodeRoutes(t, rc))
			if msg == nil {
				t.Fatal("Decode refused a valid configuration")
			}
			if _, err := c.Compile(msg); err == nil || err.Error() != want.Error() {
				t.Errorf("Compile: %v, want %v", err, want)
			}
		})
	}
}

func TestRouteCacheRetainForgetsEndedSubscriptions(t *testing.T) {
	c := NewRouteCache()
	for _, name := range []string{"80", "8080"} {
		decodeCompile(t, c, &routev3.RouteConfiguration{Name: name, VirtualHosts: []*routev3.VirtualHost{vh("a", "a")}})
	}
	c.Retain([]string{"8080"})
	if _, ok := c.names["80"]; ok {
		t.Error("80 is still kept")
	}
	if _, ok := c.names["8080"]; !ok {
		t.Error("8080 was forgotten")
	}
}

// The constant field number is route.proto's.
func TestVirtualHostsFieldNumber(t *testing.T) {
	t.Parallel()
	got := (&routev3.RouteConfiguration{}).ProtoReflect().Descriptor().Fields().ByName("virtual_hosts").Number()
	if got != virtualHostsField {
		t.Errorf("RouteConfiguration.virtual_hosts is field %d, virtualHostsField says %d", got, virtualHostsField)
	}
}
