package lab

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
)

// The world's range never overlaps the lab's own ranges, and is always private.
func TestWorldSubnet(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ pods, svcs, want string }{
		{"10.244.0.0/16", "10.96.0.0/16", "172.31.255.0/24"},
		{"172.16.0.0/12", "10.96.0.0/16", "192.168.255.0/24"},
		{"172.31.0.0/16", "192.168.0.0/16", "10.255.255.0/24"},
	} {
		got, err := worldSubnet(netip.MustParsePrefix(tc.pods), netip.MustParsePrefix(tc.svcs))
		if err != nil || got.String() != tc.want {
			t.Errorf("worldSubnet(%s, %s) = %v, %v; want %s", tc.pods, tc.svcs, got, err, tc.want)
		}
		if !got.Addr().IsPrivate() {
			t.Errorf("%s is not a private range", got)
		}
	}
	if _, err := worldSubnet(netip.MustParsePrefix("0.0.0.0/1"), netip.MustParsePrefix("128.0.0.0/1")); err == nil || !strings.Contains(err.Error(), "--pod-cidr") {
		t.Errorf("no free range: err = %v, want one naming the flags", err)
	}
	addrs := worldAddrs(netip.MustParsePrefix("172.31.255.0/24"))
	if addrs["httpbin.org"].String() != "172.31.255.10" || addrs["www.google.com"].String() != "172.31.255.12" {
		t.Errorf("world addresses = %v", addrs)
	}
}

// A ServiceEntry's own addresses win over the world's; other world names are added.
func TestWithWorld(t *testing.T) {
	t.Parallel()
	se := netip.MustParseAddr("10.96.0.99")
	w := map[string][]netip.Addr{"httpbin.org": {netip.MustParseAddr("172.31.255.10")}, "www.google.com": {netip.MustParseAddr("172.31.255.12")}}
	got := withWorld(map[string][]netip.Addr{"httpbin.org": {se}}, w)
	if got["httpbin.org"][0] != se || got["www.google.com"][0].String() != "172.31.255.12" {
		t.Errorf("withWorld = %v", got)
	}
}

// The cluster DNS of a pod without a sidecar answers the world's names, as CoreDNS's
// upstream would, and still NXDOMAIN for anything else.
func TestKubeDNSAnswersTheWorld(t *testing.T) {
	t.Parallel()
	k := newKubeDNS(model.New(nil, nil), testutil.Logger(t))
	k.setWorld(map[string][]netip.Addr{"edition.cnn.com": {netip.MustParseAddr("172.31.255.11")}})
	q := new(dns.Msg)
	q.SetQuestion("edition.cnn.com.", dns.TypeA)
	r := k.answer("default", q)
	if len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "172.31.255.11" {
		t.Errorf("edition.cnn.com = %v, want 172.31.255.11", r.Answer)
	}
	q.SetQuestion("example.org.", dns.TypeA)
	if r := k.answer("default", q); r.Rcode != dns.RcodeNameError {
		t.Errorf("example.org rcode = %d, want NXDOMAIN", r.Rcode)
	}
}
