package e2e

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
	"github.com/meshlab/meshlab/lab/ambient"
)

// TestZtunnelViews looks at an ambient lab as a learner does once curl has reached
// productpage through ztunnel: kubectl's verbs know the ztunnel pod (get pods -n
// istio-system, describe, logs with its access log line), the lab's /metrics has
// ztunnel's istio_tcp_* series with reporter source and destination over mutual TLS,
// trace explains the request hop by hop through ztunnel, and the dashboard draws the
// ambient pods, the ztunnel and the HBONE edge from curl to productpage.
func TestZtunnelViews(t *testing.T) { //nolint:tparallel // the subtests look at one lab, in order
	testutil.RequireRoot(t)
	requireZtunnel(t)
	t.Parallel()
	l := startLab(t, "ambient", "--listen", "127.0.0.1:0")
	zt := ambient.ZtunnelPodName(l.name)
	curl, _, _ := ambientPodOf(t, l.name, "curl-")
	eventually(t, l.name, "the product page", statusLine("<title>Simple Bookstore App</title>"), "-s", "http://productpage:9080/productpage")

	t.Run("kubectl verbs", func(t *testing.T) {
		out, err := meshlab(t, "get", "pods", "-n", "istio-system", "--name", l.name)
		if err != nil {
			t.Fatalf("get pods -n istio-system: %v\n%s", err, out)
		}
		if !regexp.MustCompile(`(?m)^` + zt + `\s+1/1\s+Running\s+0\s+\d+s\s*$`).MatchString(out) {
			t.Errorf("get pods -n istio-system does not list %s as kubectl does (1/1 Running 0 <age>):\n%s", zt, out)
		}
		out, err = meshlab(t, "describe", "pod", zt, "-n", "istio-system", "--name", l.name)
		if err != nil || !strings.Contains(out, "Ztunnel:") || !strings.Contains(out, "connected to the node agent") || !regexp.MustCompile(`Service account:\s+ztunnel\n`).MatchString(out) {
			t.Errorf("describe pod %s: %v\n%s", zt, err, out)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			out, err = meshlab(t, "logs", zt, "-n", "istio-system", "--name", l.name)
			if err == nil && strings.Contains(out, "connection complete") && strings.Contains(out, `direction="outbound"`) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("logs %s -n istio-system has no access log line: %v\n%s", zt, err, out)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if out, err := meshlab(t, "logs", "ds/ztunnel", "-n", "istio-system", "--name", l.name, "--tail", "1"); err != nil || strings.Count(out, "\n") != 1 {
			t.Errorf("logs ds/ztunnel --tail 1: %v\n%s", err, out)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		fams := scrapeMetrics(t, lab.PathsFor(lab.DefaultRunRoot, l.name).APISocket())
		f := fams["istio_tcp_connections_opened_total"]
		for _, rep := range []string{"source", "destination"} {
			want := map[string]string{"pod": zt, "namespace": "istio-system", "reporter": rep, "connection_security_policy": "mutual_tls", "destination_service": "productpage.default.svc.cluster.local"}
			if rep == "destination" {
				delete(want, "destination_service") // the destination reports no service
				want["destination_workload"] = "productpage-v1"
			}
			if counterValue(f, want) == 0 {
				t.Errorf("/metrics has no istio_tcp_connections_opened_total with %v", want)
			}
		}
	})

	t.Run("trace", func(t *testing.T) {
		out, err := meshlab(t, "trace", "--name", l.name, curl, "http://productpage:9080/productpage", "-o", "json")
		if err != nil {
			t.Fatalf("trace: %v\n%s", err, out)
		}
		var res api.TraceResult
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("trace -o json: %v\n%s", err, out)
		}
		var kinds []string
		for _, h := range res.Hops {
			kinds = append(kinds, h.Kind+":"+h.Direction)
		}
		if got := strings.Join(kinds, " "); res.Status != 200 || got != "capture: ztunnel:outbound capture: ztunnel:inbound app:" {
			t.Fatalf("trace: status %d, hops %s; want 200 through capture, ztunnel out, capture, ztunnel in, app\n%s", res.Status, got, out)
		}
		src, zout, zin := res.Hops[0], res.Hops[1], res.Hops[3]
		if !strings.Contains(strings.Join(ruleTexts(src.Rules), "\n"), "--to-ports 15001") {
			t.Errorf("the source capture hop lacks istio-cni's redirect to 15001: %+v", src.Rules)
		}
		if zout.Protocol != "HBONE" || !strings.HasSuffix(zout.Endpoint, ":15008") || !strings.HasSuffix(zout.Target, ":9080") ||
			zout.PeerIdentity != "spiffe://cluster.local/ns/default/sa/bookinfo-productpage" {
			t.Errorf("ztunnel outbound hop = %+v", zout)
		}
		if zin.Protocol != "HBONE" || zin.RBAC != "allowed" || zin.PeerIdentity != "spiffe://cluster.local/ns/default/sa/curl" || res.Hops[4].Pod == "" {
			t.Errorf("ztunnel inbound hop = %+v, app %+v", zin, res.Hops[4])
		}
	})

	t.Run("dashboard", func(t *testing.T) {
		chromium := findChromium(t)
		login := waitDashboardURL(t, l)
		ctx := newBrowser(t, chromium)
		run(ctx, t, "open the dashboard", chromedp.Navigate(login), chromedp.WaitVisible(chromedp.CSS("#topo-graph svg")))
		// Keep curl's connections coming so the edge is drawn from live counters.
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				case <-time.After(500 * time.Millisecond):
				}
				_, _ = meshlab(t, "exec", "--name", l.name, "deploy/curl", "--", "curl", "-s", "-o", "/dev/null", "--max-time", "5", "http://productpage:9080/productpage")
			}
		}()
		defer func() { close(stop); <-done }()
		waitJS(ctx, t, "the ztunnel drawn as a pod", `!!document.querySelector('#topo-graph rect.pod.ztunnel.ready[data-pod="`+zt+`.istio-system"]')`)
		waitJS(ctx, t, "curl drawn as an ambient pod", `!!document.querySelector('#topo-graph circle.pod.ambient[data-pod="`+curl+`"][data-mode="ambient"]')`)
		waitJS(ctx, t, "the HBONE edge curl -> productpage",
			`!!document.querySelector('#topo-graph path.edge.hbone.mtls[data-from="`+curl+`"][data-to="productpage.default.svc.cluster.local"]')`)
		labelJS := `((document.querySelector('#topo-graph .edge-label-box[data-from="` + curl + `"][data-to="productpage.default.svc.cluster.local"]') || {}).textContent || "")`
		waitJS(ctx, t, "the HBONE edge's label", labelJS+`.includes("HBONE mTLS") && `+labelJS+`.includes("conn")`)
		if label := evalJS[string](ctx, t, labelJS); strings.Contains(label, "5xx") {
			t.Errorf("the HBONE edge's label speaks of 5xx, which ztunnel (L4) cannot see: %q", label)
		}
		waitText(ctx, t, "#topo-pods", zt, "ztunnel", "ambient")
		screenshot(ctx, t, "ambient-topology")
	})
}

// ruleTexts are the rules' iptables-save texts.
func ruleTexts(rs []api.TraceRule) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Rule)
	}
	return out
}
