package accesslog

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/meshlab/meshlab/ambientapi/workload"
	"github.com/meshlab/meshlab/dataplane/ztunnel/metrics"
)

var at = time.Date(2026, 11, 28, 17, 0, 0, 123456000, time.UTC)

func TestLine(t *testing.T) {
	t.Parallel()
	curl := &workload.Workload{Name: "curl-1", Namespace: "default", ServiceAccount: "curl", CanonicalName: "curl"}
	pp := &workload.Workload{Name: "productpage-v1-1", Namespace: "default", ServiceAccount: "bookinfo-productpage", CanonicalName: "productpage"}
	svc := &metrics.ServiceDescription{Hostname: "productpage.default.svc.cluster.local", Name: "productpage", Namespace: "default"}
	src, dst := netip.MustParseAddrPort("10.0.0.9:48864"), netip.MustParseAddrPort("10.0.0.8:15008")
	hbone := netip.MustParseAddrPort("10.0.0.8:9080")

	reg := metrics.New()
	cases := []struct {
		name string
		open metrics.Open
		dst  netip.AddrPort
		hb   netip.AddrPort
		nm   Names
		err  error
		want string
	}{
		{
			name: "outbound HBONE",
			open: metrics.Open{Reporter: metrics.Source, Source: curl, DerivedSource: &metrics.Derived{Identity: "spiffe://cluster.local/ns/default/sa/curl"}, Destination: pp, DestinationService: svc, SecurityPolicy: metrics.MutualTLS},
			dst:  dst, hb: hbone, nm: Names{Src: "curl-1", Dst: "productpage-v1-1"},
			want: "2026-11-28T17:00:00.123456Z\tinfo\taccess\tconnection complete\tsrc.addr=10.0.0.9:48864 src.workload=\"curl-1\" src.namespace=\"default\" src.identity=\"spiffe://cluster.local/ns/default/sa/curl\" src.cluster=\"Kubernetes\" dst.addr=10.0.0.8:15008 dst.hbone_addr=10.0.0.8:9080 dst.service=\"productpage.default.svc.cluster.local\" dst.workload=\"productpage-v1-1\" dst.namespace=\"default\" dst.identity=\"spiffe://cluster.local/ns/default/sa/bookinfo-productpage\" dst.cluster=\"Kubernetes\" direction=\"outbound\" bytes_sent=75 bytes_recv=1105 duration=\"0ms\"",
		},
		{
			name: "inbound plaintext denied: no identities, canonical names, error",
			open: metrics.Open{Reporter: metrics.Destination, Source: curl, Destination: pp},
			dst:  netip.MustParseAddrPort("10.0.0.8:9080"),
			err:  errors.New("connection closed due to policy rejection: explicitly denied by: istio-system/istio_converted_static_strict"),
			want: "2026-11-28T17:00:00.123456Z\terror\taccess\tconnection complete\tsrc.addr=10.0.0.9:48864 src.workload=\"curl\" src.namespace=\"default\" src.cluster=\"Kubernetes\" dst.addr=10.0.0.8:9080 dst.workload=\"productpage\" dst.namespace=\"default\" dst.cluster=\"Kubernetes\" direction=\"inbound\" bytes_sent=1105 bytes_recv=75 duration=\"0ms\" error=\"connection closed due to policy rejection: explicitly denied by: istio-system/istio_converted_static_strict\"",
		},
	}
	for _, tc := range cases {
		c := reg.Open(tc.open)
		c.AddReceived(75)
		c.AddSent(1105)
		res := c.Close(metrics.FlagNone)
		res.Duration = 0
		got := FromResult(res, src, tc.dst, tc.hb, tc.nm, tc.err).Line(at)
		if got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
		rec, ok := Parse(got)
		if !ok || rec.Message != "connection complete" || rec.Target != "access" || rec.Fields["src.addr"] != "10.0.0.9:48864" || rec.Fields["bytes_sent"] == "" {
			t.Errorf("%s: Parse = %+v, %v", tc.name, rec, ok)
		}
		if tc.err != nil && rec.Fields["error"] != tc.err.Error() {
			t.Errorf("%s: error field = %q", tc.name, rec.Fields["error"])
		}
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	cases := []struct {
		line string
		ok   bool
		f    map[string]string
	}{
		{"t\tinfo\tscope\tmessage", true, map[string]string{}},
		{"t\tinfo\taccess\tconnection complete\ta=1 b=\"x y\" c=\"q\\\"\"", true, map[string]string{"a": "1", "b": "x y", "c": "q\""}},
		{"no tabs here", false, nil},
		{"t\tinfo\taccess\tm\tbroken", false, nil},
		{"t\tinfo\taccess\tm\ta=\"unterminated", false, nil},
	}
	for _, tc := range cases {
		r, ok := Parse(tc.line)
		if ok != tc.ok {
			t.Errorf("Parse(%q) ok = %v", tc.line, ok)
			continue
		}
		for k, v := range tc.f {
			if r.Fields[k] != v {
				t.Errorf("Parse(%q)[%s] = %q, want %q", tc.line, k, r.Fields[k], v)
			}
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add("2026-11-28T17:00:00.123456Z\tinfo\taccess\tconnection complete\tsrc.addr=10.0.0.9:48864 src.workload=\"curl-1\" bytes_sent=75")
	f.Fuzz(func(t *testing.T, line string) {
		r, ok := Parse(line)
		if ok && r.Fields == nil {
			t.Fatal("a parsed line without a field map")
		}
	})
}
