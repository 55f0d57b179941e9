package e2e

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
)

// TestWaypointTraffic sends a request from an ambient pod to a Service whose namespace
// uses a waypoint and follows it through: curl's ztunnel tunnels it (HBONE) to the
// waypoint's 15008, the waypoint's proxy terminates the CONNECT (connect_terminate),
// routes it in main_internal by the Service VIP, and re-originates HBONE to httpbin's
// 15008 (connect_originate), where httpbin's ztunnel sees the waypoint's identity. The
// waypoint's stats count the request; the kernel of httpbin's namespace sees HBONE from
// the waypoint's address and nothing from curl's.
func TestWaypointTraffic(t *testing.T) {
	testutil.RequireRoot(t)
	requireZtunnel(t)
	l := startLab(t, "testdata/ambient-waypoint-traffic.yaml")
	wp, _, wpIP := ambientPodOf(t, l.name, "waypoint-")
	_, binNS, _ := ambientPodOf(t, l.name, "httpbin-")
	_, _, curlIP := ambientPodOf(t, l.name, "curl-")
	// Count what reaches httpbin's namespace on the wire: HBONE from the waypoint, and
	// anything from curl itself on 15008 or 8080 (there should be none: the Service's
	// traffic goes through the waypoint).
	rules := map[string][]string{
		"e2e-wp-15008":   {"-s", wpIP, "--dport", "15008"},
		"e2e-curl-15008": {"-s", curlIP, "--dport", "15008"},
		"e2e-curl-8080":  {"-s", curlIP, "--dport", "8080"},
	}
	for comment, match := range rules {
		args := append([]string{"iptables", "-t", "mangle", "-I", "PREROUTING", "1", "-i", "eth0", "-p", "tcp"}, match...)
		inNetns(t, binNS, append(args, "-m", "comment", "--comment", comment)...)
	}
	r := eventually(t, l.name, "httpbin's /get through the waypoint", statusLine(`"url"`),
		"-s", "http://httpbin:8000/get")
	t.Logf("curl -> httpbin through the waypoint: %s", firstLineOf(r.out))

	if n := packets(t, binNS, "e2e-wp-15008"); n == 0 {
		t.Errorf("no packet from the waypoint (%s) reached httpbin on 15008: the waypoint did not re-originate HBONE", wpIP)
	}
	for _, c := range []string{"e2e-curl-15008", "e2e-curl-8080"} {
		if n := packets(t, binNS, c); n != 0 {
			t.Errorf("%d packets from curl (%s) reached httpbin directly (%s): the Service's traffic went around the waypoint", n, curlIP, c)
		}
	}

	// The waypoint's proxy counts the CONNECT it terminated and the request it routed to
	// httpbin's inbound-vip cluster.
	stats := func() map[string]int {
		out, err := meshlab(t, "exec", "--name", l.name, wp, "--", "curl", "-sS", "--max-time", "5",
			"http://127.0.0.1:15000/stats?filter=connect_terminate|inbound-vip")
		if err != nil {
			t.Fatalf("stats of %s: %v\n%s", wp, err, out)
		}
		vals := map[string]int{}
		for _, line := range strings.Split(out, "\n") {
			name, v, ok := strings.Cut(line, ": ")
			if n, err := strconv.Atoi(v); ok && err == nil {
				vals[name] = n
			}
		}
		return vals
	}
	st := stats()
	if n := st["http.connect_terminate.downstream_rq_total"]; n < 1 {
		t.Errorf("the waypoint terminated %d CONNECTs (http.connect_terminate.downstream_rq_total), want >= 1", n)
	}
	if n := st["cluster.inbound-vip|8000|http|httpbin.default.svc.cluster.local;.upstream_rq_total"]; n < 1 {
		t.Errorf("the waypoint routed %d requests to httpbin's inbound-vip cluster, want >= 1:\n%v", n, st)
	}

	// httpbin's ztunnel saw the connection come from the waypoint's identity: its
	// destination-side metric names the waypoint as the source principal.
	waypointID := "spiffe://cluster.local/ns/default/sa/waypoint"
	fams := scrapeMetrics(t, lab.PathsFor(lab.DefaultRunRoot, l.name).APISocket())
	if n := counterValue(fams["istio_tcp_connections_opened_total"], map[string]string{"reporter": "destination",
		"destination_workload": "httpbin", "source_principal": waypointID}); n == 0 {
		t.Errorf("httpbin's ztunnel counted no connection from the waypoint's identity (istio_tcp_connections_opened_total)")
	}
	// Its inbound access log line comes when the connection ends: the waypoint keeps its
	// upstream connection pooled, so delete the waypoint and read the line.
	if out, err := meshlab(t, "waypoint", "delete", "waypoint", "--lab", l.name); err != nil {
		t.Fatalf("waypoint delete: %v\n%s", err, out)
	}
	line := regexp.MustCompile(`(?m)^.*connection complete\t.*dst\.workload="httpbin-.*direction="inbound".*$`)
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, _ := meshlab(t, "logs", "--name", l.name, "ds/ztunnel", "-n", "istio-system")
		if inbound := line.FindAllString(out, -1); len(inbound) > 0 {
			for _, m := range inbound {
				if !strings.Contains(m, `src.identity="`+waypointID+`"`) {
					t.Errorf("httpbin's ztunnel logged an inbound connection not from the waypoint's identity:\n%s", m)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ztunnel logged no inbound connection to httpbin:\n%s", out)
		}
		time.Sleep(300 * time.Millisecond)
	}
}
