package httpconn

import (
	"slices"
	"sync"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// RouteCache decodes and compiles the route configurations a proxy takes over RDS,
// reusing what the last configuration of the same name had: a virtual host whose
// encoding did not change is not decoded, validated, checked or compiled again.
//
// A one-service VirtualService change reaches every sidecar as its whole outbound route
// configuration, one virtual host per Service of the port, of which one changed; Envoy
// builds its route table afresh from it, and so did the proxy, which cost each of a lab's
// proxies more CPU on every such change than the rest of the push. A decoded virtual
// host depends on its encoding alone and a compiled one on that and the configuration's
// direct response body limit, so reusing them changes nothing but the cost; anything
// short of a valid configuration is left to the whole decode and compile (Decode
// returns nil, Compile falls back to CompileRoutes), so refusals read as before.
//
// Each name keeps the virtual hosts of its last decode and compile only, in order: a
// virtual host is looked for where it was (near its index: one added or removed before
// it moves it by one), which costs no map per apply. Safe for concurrent use.
type RouteCache struct {
	mu    sync.Mutex
	names map[string]routeCacheEntry
}

// routeCacheEntry is what the last decode and compile of one name had, in the
// configuration's order. Its slices are replaced, never changed, so a copy of the entry
// is read without the lock.
type routeCacheEntry struct {
	decoded  []decodedVirtualHost
	compiled []compiledVirtualHost
	// exact is the exact domains' map of the last compile's table (RouteTable.exact),
	// which a compile of the same domains shares.
	exact map[string]int
}

// decodedVirtualHost is a decoded, valid virtual host and its encoding (kept so the
// next decode shares it instead of copying it), and whether its encoding holds only
// fields the proxy implements (fieldcheck's AcceptsEncoding: Compile then skips the
// walk of the decoded message).
type decodedVirtualHost struct {
	enc      string
	msg      *routev3.VirtualHost
	accepted bool
}

// compiledVirtualHost is a checked, compiled virtual host, the decoded message it was
// compiled from and the direct response body limit it was compiled under.
type compiledVirtualHost struct {
	src     *routev3.VirtualHost
	vh      *VirtualHost
	maxBody uint32
}

// reuseWindow is how far from its index a virtual host of the last configuration is
// looked for: one virtual host added, removed or changed before it, and the next ones
// are found at their new index.
const reuseWindow = 2

// near returns the element of prev at an index within reuseWindow of i that match
// accepts, looking at i first.
func near[T any](prev []T, i int, match func(T) bool) (T, bool) {
	for d := range 2*reuseWindow + 1 {
		// i, i+1, i-1, i+2, i-2
		k := i + (d+1)/2
		if d%2 == 0 {
			k = i - d/2
		}
		if k >= 0 && k < len(prev) && match(prev[k]) {
			return prev[k], true
		}
	}
	var zero T
	return zero, false
}

// NewRouteCache returns an empty cache.
func NewRouteCache() *RouteCache { return &RouteCache{names: map[string]routeCacheEntry{}} }

// virtualHostsField is RouteConfiguration.virtual_hosts' field number (route.proto;
// TestVirtualHostsFieldNumber holds it to the descriptor). A constant, not read from the
// descriptor in a package variable: that built route.proto's descriptors in every
// process's init, 15 KB the agent and the apps paid without routing anything.
const virtualHostsField protowire.Number = 2

// Decode unmarshals and validates (ValidateAll) the encoding of a RouteConfiguration.
// A virtual host encoded as one of the last decode of the same name is that decode's
// message, shared. It returns nil when b does not decode or validate: the caller's
// whole decode then says why.
func (c *RouteCache) Decode(b []byte) *routev3.RouteConfiguration {
	rest, hosts, ok := splitVirtualHosts(b)
	if !ok {
		return nil
	}
	rc := &routev3.RouteConfiguration{}
	if err := proto.Unmarshal(rest, rc); err != nil || rc.ValidateAll() != nil {
		return nil
	}
	prev := c.entry(rc.GetName())
	decoded := make([]decodedVirtualHost, len(hosts))
	rc.VirtualHosts = make([]*routev3.VirtualHost, len(hosts))
	for i, h := range hosts {
		d, ok := near(prev.decoded, i, func(d decodedVirtualHost) bool { return d.enc == string(h) })
		if !ok {
			d = decodedVirtualHost{enc: string(h), msg: &routev3.VirtualHost{}}
			if err := proto.Unmarshal(h, d.msg); err != nil || d.msg.ValidateAll() != nil {
				return nil
			}
			d.accepted = routeAllow.AcceptsEncoding(d.msg.ProtoReflect().Descriptor(), h, "")
		}
		decoded[i] = d
		rc.VirtualHosts[i] = d.msg
	}
	c.update(rc.GetName(), func(e *routeCacheEntry) { e.decoded = decoded })
	return rc
}

// Compile compiles rc as CompileRoutes does; rc passed ValidateAll (a decode's). A
// virtual host the last compile of the same name had (the same message, as Decode shares
// it) under the same body limit is that compile's, shared.
func (c *RouteCache) Compile(rc *routev3.RouteConfiguration) (*RouteTable, error) {
	if rc == nil || routeAllow.CheckExcept(rc, "virtual_hosts") != nil {
		return CompileRoutes(rc)
	}
	prev := c.entry(rc.GetName()) // its decoded are rc's own virtual hosts: Decode's
	maxBody := maxDirectResponseBody(rc)
	compiled := make([]compiledVirtualHost, len(rc.GetVirtualHosts()))
	exact := prev.exact
	if !sameDomains(prev.compiled, rc.GetVirtualHosts()) {
		exact = nil
	}
	t := newRouteTable(rc, exact)
	for i, pvh := range rc.GetVirtualHosts() {
		cv, ok := near(prev.compiled, i, func(cv compiledVirtualHost) bool { return cv.src == pvh && cv.maxBody == maxBody })
		if !ok {
			// A refusal is CompileRoutes', which names the field from the configuration.
			d, _ := near(prev.decoded, i, func(d decodedVirtualHost) bool { return d.msg == pvh })
			if !d.accepted && routeAllow.Check(pvh) != nil {
				return CompileRoutes(rc)
			}
			vh, err := compileVirtualHost(pvh, maxBody)
			if err != nil {
				return CompileRoutes(rc)
			}
			cv = compiledVirtualHost{src: pvh, vh: vh, maxBody: maxBody}
		}
		compiled[i] = cv
		if err := t.add(rc.GetName(), pvh.GetDomains(), cv.vh, exact != nil); err != nil {
			return nil, err
		}
	}
	t.sortWildcards()
	c.update(rc.GetName(), func(e *routeCacheEntry) { e.compiled, e.exact = compiled, t.exact })
	return t, nil
}

// sameDomains reports whether the virtual hosts vhs have, one by one in order, the
// domains of the last compile's (prev): the exact domains' map of its table is then
// theirs. A virtual host the route cache shared is the same message; a changed one
// (another route, a new weight) usually keeps its domains.
func sameDomains(prev []compiledVirtualHost, vhs []*routev3.VirtualHost) bool {
	if len(prev) != len(vhs) {
		return false
	}
	for i, pvh := range vhs {
		if prev[i].src != pvh && !slices.Equal(prev[i].src.GetDomains(), pvh.GetDomains()) {
			return false
		}
	}
	return true
}

// Retain forgets the names not in names (the subscriptions that ended).
func (c *RouteCache) Retain(names []string) {
	keep := make(map[string]bool, len(names))
	for _, n := range names {
		keep[n] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for n := range c.names {
		if !keep[n] {
			delete(c.names, n)
		}
	}
}

// entry returns what the last decode and compile of name had (nothing: nil maps).
func (c *RouteCache) entry(name string) routeCacheEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.names[name]
}

// update replaces name's entry with a copy that set changed.
func (c *RouteCache) update(name string, set func(*routeCacheEntry)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.names[name]
	set(&e)
	c.names[name] = e
}

// splitVirtualHosts splits the encoding of a RouteConfiguration into the encoding of its
// fields other than virtual_hosts and the encodings of its virtual hosts, in order. It
// reports false when b is not a well-formed message.
func splitVirtualHosts(b []byte) (rest []byte, hosts [][]byte, ok bool) {
	rest = make([]byte, 0, 64)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, nil, false
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return nil, nil, false
		}
		if num == virtualHostsField && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b[n:])
			hosts = append(hosts, v)
		} else {
			rest = append(rest, b[:n+m]...)
		}
		b = b[n+m:]
	}
	return rest, hosts, true
}
