package rbac

import (
	"net/netip"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/meshlab/meshlab/ambientapi/security"
	"github.com/meshlab/meshlab/ambientapi/workload"
)

// FuzzCompile feeds WADS bytes through the whole path a ztunnel takes: unmarshal,
// compile, evaluate. Nothing may panic, and a compiled policy's decision must not depend on
// being asked twice.
func FuzzCompile(f *testing.F) {
	seed := &security.Authorization{
		Name: "p", Namespace: "ns", Scope: security.Scope_NAMESPACE, Action: security.Action_DENY,
		Groups: []*security.Group{{Rules: []*security.Rules{{Matches: []*security.Match{{
			Namespaces:       []*security.StringMatch{sm("exact", "a"), sm("presence", "")},
			NotPrincipals:    []*security.StringMatch{sm("prefix", "x")},
			SourceIps:        []*security.Address{{Address: []byte{10, 0, 0, 0}, Length: 8}},
			DestinationPorts: []uint32{80},
		}}}}}},
	}
	b, err := proto.Marshal(seed)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		a := &security.Authorization{}
		if proto.Unmarshal(b, a) != nil {
			return
		}
		p, err := Compile(a)
		if err != nil {
			return
		}
		for _, c := range []Conn{tlsConn(), plaintextConn(), tlsConnAlt()} {
			first, second := p.Matches(c), p.Matches(c)
			if first != second {
				t.Fatal("Matches is not deterministic")
			}
		}
		d := Evaluate([]*security.Authorization{a}, &workload.Workload{Namespace: a.GetNamespace()}, tlsConn())
		if d.Reason == 0 || (d.Err() == nil) != d.Allowed {
			t.Fatalf("decision %+v inconsistent", d)
		}
	})
}

// FuzzParseIdentity: whatever parses prints back as itself.
func FuzzParseIdentity(f *testing.F) {
	f.Add("spiffe://cluster.local/ns/default/sa/curl")
	f.Add("spiffe://a/ns/b/sa/c/d")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseIdentity(s)
		if err != nil {
			return
		}
		if id.String() != s {
			t.Fatalf("ParseIdentity(%q).String() = %q", s, id.String())
		}
		if strings.Contains(id.Namespace, "/") {
			t.Fatalf("namespace %q holds a slash", id.Namespace)
		}
	})
}

// FuzzParseAddress: an accepted address holds its own address.
func FuzzParseAddress(f *testing.F) {
	f.Add([]byte{10, 0, 0, 1}, uint32(24))
	f.Fuzz(func(t *testing.T, b []byte, length uint32) {
		p, ok := ParseAddress(b, length)
		if !ok {
			return
		}
		if !p.Contains(p.Addr()) || (len(b) != 4 && len(b) != 16) {
			t.Fatalf("ParseAddress(%v, %d) = %v", b, length, p)
		}
		_ = netip.Prefix.Masked(p)
	})
}
