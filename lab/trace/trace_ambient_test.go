package trace

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/dataplane/ztunnel/accesslog"
)

// inpodRules is the nat table of an ambient pod with istio-cni's chains, "%d" for the
// counters that rise.
const inpodRules = `*nat
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:ISTIO_OUTPUT - [0:0]
:ISTIO_PRERT - [0:0]
[%[1]d:0] -A PREROUTING -m comment --comment "connections arriving at the pod are considered for redirection to the node proxy" -j ISTIO_PRERT
[%[1]d:0] -A OUTPUT -m comment --comment "connections the pod opens are considered for redirection to the node proxy" -j ISTIO_OUTPUT
[%[1]d:0] -A ISTIO_OUTPUT ! -d 127.0.0.1/32 -p tcp -m mark ! --mark 0x539/0xfff -m comment --comment "all other outbound TCP not from the node proxy goes to its outbound port 15001" -j REDIRECT --to-ports 15001
COMMIT
`

// TestTraceAmbient traces a request between two ambient pods through a lab given as
// Deps: the source's in-pod rule that counted it, ztunnel's outbound side (15001, HBONE
// to the destination's 15008 with the target as :authority, the peer's identity), the
// destination's in-pod chains, ztunnel's inbound side (15008, the caller's identity, the
// L4 policy's verdict) and the app, all read from ztunnel's access log lines for the
// traced connection; a denied connection shows the verdict and ztunnel's reason.
func TestTraceAmbient(t *testing.T) {
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"pod":"reviews-v1","namespace":"default","version":"v1"}`)
	}))
	t.Cleanup(app.Close)
	labels := func(app string) map[string]string {
		return map[string]string{"app": app, model.LabelDataplaneMode: model.DataplaneModeAmbient}
	}
	pp := &model.Pod{Name: "productpage-v1", Namespace: "default", Labels: labels("productpage"), IP: netip.MustParseAddr("10.244.0.2")}
	rv := &model.Pod{Name: "reviews-v1", Namespace: "default", Labels: labels("reviews"), IP: netip.MustParseAddr("10.244.0.3")}
	svc := &model.Service{Name: "reviews", Namespace: "default", VIP: netip.MustParseAddr("10.96.0.10"), Selector: map[string]string{"app": "reviews"},
		Ports: []model.ServicePort{{Name: "http", Port: 9080, TargetPort: 9080}}}
	logFile := filepath.Join(t.TempDir(), "ztunnel.log")
	if err := os.WriteFile(logFile, []byte("2026-11-28T20:00:00.000000Z\tinfo\tztunnel\tstarted\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	denied := ""
	f := &fakeLab{
		model:      model.New([]*model.Service{svc}, []*model.Pod{pp, rv}),
		app:        app.Listener.Addr().String(),
		rules:      map[string]string{pp.Key(): inpodRules, rv.Key(): inpodRules},
		reads:      map[string]int{},
		ztunnel:    &model.Pod{Name: "ztunnel-x2b9q", Namespace: "istio-system"},
		ztunnelLog: logFile,
	}
	f.onClose = func(local, _ net.Addr) {
		src := netip.MustParseAddrPort(local.String())
		hbone, target := netip.MustParseAddrPort("10.244.0.3:15008"), netip.MustParseAddrPort("10.244.0.3:9080")
		now := time.Now()
		lines := []string{
			// another connection from the same pod, earlier: not the traced one
			accesslog.Entry{Src: netip.MustParseAddrPort("10.244.0.2:40000"), Dst: hbone, DstHBONEAddr: netip.MustParseAddrPort("10.244.0.3:9999"), Direction: "inbound"}.Line(now),
			accesslog.Entry{Src: netip.MustParseAddrPort("10.244.0.2:41234"), SrcWorkload: "productpage-v1", SrcNamespace: "default", SrcIdentity: "spiffe://cluster.local/ns/default/sa/bookinfo-productpage",
				Dst: hbone, DstHBONEAddr: target, DstWorkload: "reviews-v1", DstNamespace: "default", Direction: "inbound",
				DstIdentity: "spiffe://cluster.local/ns/default/sa/bookinfo-reviews", Duration: 3 * time.Millisecond, Error: denied}.Line(now),
			accesslog.Entry{Src: src, SrcWorkload: "productpage-v1", SrcNamespace: "default", SrcIdentity: "spiffe://cluster.local/ns/default/sa/bookinfo-productpage",
				Dst: hbone, DstHBONEAddr: target, DstService: "reviews.default.svc.cluster.local", DstWorkload: "reviews-v1", DstNamespace: "default",
				DstIdentity: "spiffe://cluster.local/ns/default/sa/bookinfo-reviews", Direction: "outbound", Duration: 4 * time.Millisecond}.Line(now),
		}
		fh, err := os.OpenFile(logFile, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer fh.Close()
		_, _ = fh.WriteString(strings.Join(lines, "\n") + "\n")
	}
	res, err := Trace(t.Context(), f, api.TraceRequest{Pod: "productpage-v1", Target: "http://reviews:9080/"})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, h := range res.Hops {
		kinds = append(kinds, h.Kind+":"+h.Pod+":"+h.Direction)
	}
	want := "capture:productpage-v1: ztunnel:ztunnel-x2b9q.istio-system:outbound capture:reviews-v1: ztunnel:ztunnel-x2b9q.istio-system:inbound app:reviews-v1:"
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("hops = %s\nwant   %s", got, want)
	}
	if r := res.Hops[0].Rules; len(r) != 2 || r[1].Chain != "ISTIO_OUTPUT" || !strings.Contains(r[1].Rule, "--to-ports 15001") || r[1].Packets != 1 {
		t.Errorf("source capture rules = %+v; want OUTPUT's jump and ISTIO_OUTPUT's redirect to 15001 (not ISTIO_PRERT, the inbound side)", r)
	}
	out := res.Hops[1]
	if out.Protocol != "HBONE" || out.Endpoint != "10.244.0.3:15008" || out.Target != "10.244.0.3:9080" || !out.MTLS ||
		out.PeerIdentity != "spiffe://cluster.local/ns/default/sa/bookinfo-reviews" || !strings.Contains(out.Listener.Name, "15001") ||
		out.DurationMs == nil || *out.DurationMs != 4 || !strings.Contains(out.AccessLog, `direction="outbound"`) {
		t.Errorf("ztunnel outbound hop = %+v", out)
	}
	if r := res.Hops[2].Rules; len(r) != 3 {
		t.Errorf("destination capture rules = %+v; want its three chains' rules (ztunnel's dial to the app walks OUTPUT)", r)
	}
	in := res.Hops[3]
	if in.Protocol != "HBONE" || in.RBAC != "allowed" || in.PeerIdentity != "spiffe://cluster.local/ns/default/sa/bookinfo-productpage" ||
		in.Endpoint != "10.244.0.3:9080" || !strings.Contains(in.Listener.Name, "15008") || !strings.Contains(in.AccessLog, "41234") {
		t.Errorf("ztunnel inbound hop = %+v", in)
	}

	denied = "connection closed due to policy rejection: allow policies exist, but none allowed"
	if res, err = Trace(t.Context(), f, api.TraceRequest{Pod: "productpage-v1", Target: "http://reviews:9080/"}); err != nil {
		t.Fatal(err)
	}
	if in := res.Hops[3]; in.RBAC != "denied" || !strings.Contains(in.Notes, "none allowed") {
		t.Errorf("denied: inbound hop = %+v; want RBAC denied with ztunnel's reason", in)
	}
}
