package lab

import (
	"net/netip"
	"os"
	"strings"
	"testing"
)

func TestPodResolvConf(t *testing.T) {
	host := []byte("# generated\nsearch corp.example\nnameserver 10.255.255.53\nnameserver fe80::1%eth0\nnameserver 192.0.2.1\noptions edns0\n")
	got := podResolvConf("shop", host)
	want := "search shop.svc.cluster.local svc.cluster.local cluster.local\n" +
		"nameserver 10.255.255.53\nnameserver 192.0.2.1\noptions ndots:5\n"
	if got != want {
		t.Errorf("podResolvConf =\n%s\nwant\n%s", got, want)
	}
	if got := podResolvConf("default", nil); got != "search default.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n" {
		t.Errorf("podResolvConf without a host resolv.conf = %q", got)
	}
}

func TestPodHosts(t *testing.T) {
	got := podHosts("frontend-v1", netip.MustParseAddr("10.244.0.5"))
	for _, want := range []string{"127.0.0.1\tlocalhost\n", "10.244.0.5\tfrontend-v1\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("podHosts lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "::1") {
		t.Errorf("podHosts names an IPv6 address; pods have none:\n%s", got)
	}
	if h := podHostname(strings.Repeat("a", 70)); len(h) != 63 {
		t.Errorf("podHostname of 70 characters has %d, want 63", len(h))
	}
}

// TestAllocateAppUIDs allocates for two labs under one root: each pod gets a distinct uid,
// never 0 nor the proxy's, the second lab a slot the first does not use, and the uids
// land in lab.json.
func TestAllocateAppUIDs(t *testing.T) {
	root := t.TempDir()
	newLab := func(name string, pods int) *Lab {
		p := PathsFor(root, name)
		if err := os.MkdirAll(p.Dir, 0o755); err != nil {
			t.Fatal(err)
		}
		l := &Lab{opts: Options{Name: name, RunRoot: root}, paths: p, rec: &Record{Name: name}}
		for i := 0; i < pods; i++ {
			l.rec.Pods = append(l.rec.Pods, PodRecord{Name: "p" + string(rune('a'+i))})
		}
		if err := writeRecord(p.Record(), l.rec); err != nil {
			t.Fatal(err)
		}
		return l
	}
	a, b := newLab("a", 3), newLab("b", 2)
	for _, l := range []*Lab{a, b} {
		if err := l.allocateAppUIDs(); err != nil {
			t.Fatalf("allocate for lab %s: %v", l.opts.Name, err)
		}
	}
	seen := map[uint32]string{}
	for _, l := range []*Lab{a, b} {
		r, err := ReadRecord(l.paths)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range r.Pods {
			who := l.opts.Name + "/" + p.Name
			switch {
			case p.AppUID == 0 || p.AppUID == ProxyUID || p.AppUID < appUIDFirst:
				t.Errorf("%s: app uid %d", who, p.AppUID)
			case seen[p.AppUID] != "":
				t.Errorf("%s and %s share app uid %d", who, seen[p.AppUID], p.AppUID)
			}
			seen[p.AppUID] = who
		}
	}
	if got := b.rec.Pods[0].AppUID; got != appUIDFirst+appUIDSlotSize {
		t.Errorf("second lab's first app uid = %d, want the next slot %d", got, appUIDFirst+appUIDSlotSize)
	}
	// A lab that goes frees its slot for the next one.
	if err := os.RemoveAll(a.paths.Dir); err != nil {
		t.Fatal(err)
	}
	c := newLab("c", 1)
	if err := c.allocateAppUIDs(); err != nil {
		t.Fatal(err)
	}
	if got := c.rec.Pods[0].AppUID; got != appUIDFirst {
		t.Errorf("after lab a went, lab c's app uid = %d, want the freed first slot %d", got, appUIDFirst)
	}
	if _, err := freeSlot(func() map[uint32]bool {
		m := map[uint32]bool{}
		for s := uint32(0); s < appUIDSlots; s++ {
			m[s] = true
		}
		return m
	}()); err == nil {
		t.Error("freeSlot with every slot used: no error")
	}
}
