package e2e

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/meshlab/meshlab/internal/testutil"
)

// invalidVS is refused: a destination's weight is negative (Istio's validation refuses it;
// weights that do not sum to 100 are relative and valid).
const invalidVS = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: backend-bad}
spec:
  hosts: [backend]
  http:
  - route:
    - destination: {host: backend}
      weight: 90
    - destination: {host: backend}
      weight: -10
`

// findChromium returns Debian's chromium, skipping the test when it is absent, or
// failing it when CI=true (make test installs it).
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed and CI=true: make test installs it (apt-get install -y chromium)")
	}
	t.Skip("skipped: chromium is not installed (apt-get install -y chromium, or run make test)")
	return ""
}

// newBrowser starts a headless Chromium with a fresh profile; cleanup stops it.
func newBrowser(t *testing.T, path string) context.Context {
	t.Helper()
	opts := append([]chromedp.ExecAllocatorOption{}, chromedp.DefaultExecAllocatorOptions[:]...)
	opts = append(opts,
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox, // as root
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 900), // the size the dashboard is checked at
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

var dashboardURL = regexp.MustCompile(`http://127\.0\.0\.1:\d+/\?token=[0-9a-f]+`)

// waitDashboardURL returns the login URL `meshlab up` printed.
func waitDashboardURL(t *testing.T, l *runningLab) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if u := dashboardURL.FindString(l.out.String()); u != "" {
			return u
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("meshlab up printed no dashboard URL:\n%s", l.out.String())
	return ""
}

// run runs browser actions with a deadline.
func run(ctx context.Context, t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(tctx, steps...); err != nil {
		bctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		body, _ := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("main")))
		t.Fatalf("%s: %v\npage text:\n%s", what, err, body)
	}
}

// waitText polls the text of sel until it contains every want.
func waitText(ctx context.Context, t *testing.T, sel string, want ...string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var text string
	for time.Now().Before(deadline) {
		tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		got, err := chromedp.Run(tctx, chromedp.Text(chromedp.CSS(sel)))
		if err == nil {
			text = got
		}
		cancel()
		ok := err == nil
		for _, w := range want {
			ok = ok && strings.Contains(text, w)
		}
		if ok {
			return text
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s never showed %q; last text:\n%s", sel, want, text)
	return ""
}

// screenshot saves the page as name.png: in ../test-artifacts when
// MESHLAB_KEEP_SCREENSHOTS is set (to look at them), else in the test's temporary
// directory, removed when the test ends.
func screenshot(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := t.TempDir()
	if os.Getenv("MESHLAB_KEEP_SCREENSHOTS") != "" {
		dir = filepath.Join("..", "test-artifacts")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// TestDashboardInBrowser drives the dashboard of a real hello lab in headless Chromium:
// the topology shows the pods, the traffic tool shows the v1/v2 distribution, a proxy
// restart shows a new live epoch, an invalid VirtualService shows its field error, and
// the events view streams what happened.
func TestDashboardInBrowser(t *testing.T) { //nolint:tparallel // the subtests drive one lab and one browser, in order
	testutil.RequireRoot(t)
	chromium := findChromium(t)
	t.Parallel()
	l := startLab(t, "--listen", "127.0.0.1:0")
	login := waitDashboardURL(t, l)
	ctx := newBrowser(t, chromium)

	base := strings.Split(login, "?")[0]

	// Each step is a subtest on the same lab and browser, so one failing feature does
	// not hide the state of the others.
	t.Run("topology", func(t *testing.T) {
		// The login link lands on the topology, which lists every pod.
		run(ctx, t, "open the dashboard", chromedp.Navigate(login), chromedp.WaitVisible(chromedp.CSS("#topo-graph svg")))
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		loc, err := chromedp.Run(lctx, chromedp.Location())
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(loc, "token=") {
			t.Errorf("the token stayed in the address bar: %s", loc)
		}
		waitText(ctx, t, "#topo-graph", "frontend-v1", "backend-v1", "backend-v2", "backend.default", "frontend.default")
		waitText(ctx, t, "#topo-pods", "frontend-v1", "backend-v1", "backend-v2")
		screenshot(ctx, t, "dashboard-topology")
	})

	t.Run("traffic", func(t *testing.T) {
		// 40 requests from frontend-v1 to backend, split over v1 and v2.
		run(ctx, t, "send traffic",
			chromedp.Navigate(base+"#traffic"),
			chromedp.WaitVisible(chromedp.CSS("#traffic-form")),
			chromedp.SetValue(chromedp.CSS("#traffic-pod"), "frontend-v1"),
			chromedp.SetValue(chromedp.CSS("#traffic-url"), "http://backend:8080/"),
			chromedp.SetValue(chromedp.CSS("#traffic-n"), "40"),
			chromedp.Click(chromedp.CSS(`#traffic-form button[type=submit]`)),
		)
		waitText(ctx, t, "#traffic-pods", "backend-v1", "backend-v2")
		waitText(ctx, t, "#traffic-result", "200", "p50")
		screenshot(ctx, t, "dashboard-traffic")
		// The topology draws the edge the traffic made.
		run(ctx, t, "back to the topology", chromedp.Navigate(base+"#topology"))
		waitText(ctx, t, "#topo-graph", "rps")
		screenshot(ctx, t, "dashboard-topology-edge")
	})

	t.Run("config", func(t *testing.T) {
		// An invalid VirtualService is refused with the field at fault.
		run(ctx, t, "apply an invalid VirtualService",
			chromedp.Navigate(base+"#config"),
			chromedp.WaitVisible(chromedp.CSS("#config-yaml")),
			chromedp.SetValue(chromedp.CSS("#config-yaml"), invalidVS),
			chromedp.Click(chromedp.CSS("#config-apply")),
		)
		waitText(ctx, t, "#config-errors", "spec.http[0].route[1].weight", "must not be negative")
		screenshot(ctx, t, "dashboard-config-error")
	})

	t.Run("pod", func(t *testing.T) {
		// The pod page shows epochs, capture rules with their comments, and xDS state;
		// restarting the proxy shows epoch 1 live.
		run(ctx, t, "open backend-v1",
			chromedp.Navigate(base+"#pods/backend-v1"),
			chromedp.WaitVisible(chromedp.CSS(`.epoch.live[data-epoch="0"]`)),
		)
		waitText(ctx, t, "#pod-capture", "ISTIO_OUTPUT", "outbound TCP goes to the virtualOutbound listener")
		waitText(ctx, t, "#pod-xds", "Cluster", "ACK")
		run(ctx, t, "restart the proxy", chromedp.Click(chromedp.CSS("#pod-restart")))
		waitText(ctx, t, "#pod-epochs", "epoch 1")
		defer screenshot(ctx, t, "dashboard-pod-restart")
		run(ctx, t, "wait for epoch 1 live", chromedp.WaitVisible(chromedp.CSS(`.epoch.live[data-epoch="1"]`)))
	})

	t.Run("trace", func(t *testing.T) {
		// "Trace a request" on frontend-v1's page draws the path hop by hop: the capture
		// rules, the outbound sidecar's route and cluster with the Service they came from,
		// mTLS with the backend's identity, and the app's answer.
		run(ctx, t, "trace frontend-v1 -> backend",
			chromedp.Navigate(base+"#pods/frontend-v1"),
			chromedp.WaitVisible(chromedp.CSS("#trace-form")),
			chromedp.SetValue(chromedp.CSS("#trace-target"), "http://backend:8080/"),
			chromedp.Click(chromedp.CSS(`#trace-form button[type=submit]`)),
		)
		waitText(ctx, t, "#trace-result .trace-summary", "frontend-v1", "http://backend:8080/", "status 200")
		waitText(ctx, t, `#trace-hops li.hop-capture`, "capture · iptables in frontend-v1", "ISTIO_REDIRECT", "outbound TCP goes to the virtualOutbound listener")
		waitText(ctx, t, `#trace-hops li.hop-proxy`, "outbound sidecar · frontend-v1", "0.0.0.0_8080", "backend.default.svc.cluster.local:8080",
			"spiffe://cluster.local/ns/default/sa/backend")
		waitText(ctx, t, `#trace-hops li.hop-proxy tr[data-field="route"]`, "default")
		waitText(ctx, t, `#trace-hops li.hop-proxy tr[data-field="cluster"]`, "outbound|8080||backend.default.svc.cluster.local", "Service default/backend")
		waitText(ctx, t, `#trace-hops li.hop-app`, "app · backend-v", "200")
		screenshot(ctx, t, "dashboard-trace")
	})

	t.Run("no guide", func(t *testing.T) {
		// A lab brought up with `meshlab up` has no guide: the panel stays hidden.
		run(ctx, t, "open the topology", chromedp.Navigate(base+"#topology"), chromedp.WaitVisible(chromedp.CSS("#topo-graph svg")))
		ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		hidden, err := chromedp.Run(ectx, chromedp.Evaluate[bool](`document.getElementById("guide").hidden`))
		if err != nil || !hidden {
			t.Errorf("guide panel hidden = %v (%v), want hidden in a lab without a guide", hidden, err)
		}
	})

	t.Run("markdown", func(t *testing.T) {
		// Instructions are markdown rendered as DOM nodes: markup in them stays text and
		// links other than web, relative or fragment ones are not links.
		ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		got, err := chromedp.Run(ectx, chromedp.Evaluate[string](renderMarkdownProbe))
		if err != nil {
			t.Fatal(err)
		}
		want := `h3:Step <b>one</b>|p:Run apply then see docs.|ul:first <img src=x onerror=alert(1)>,second item continued|` +
			`pre:kind: VirtualService\n<script>alert(2)</script>|p:[bad](javascript:alert) link kubectl|code:apply,kubectl|a:/docs|` +
			`img:0|script:0|onerror:0`
		if got != want {
			t.Errorf("rendered markdown:\n got %s\nwant %s", got, want)
		}
	})

	t.Run("100 pods", func(t *testing.T) {
		// The topology of 20 services of 5 pods each, with 95 edges, drawn in the page.
		// The time is logged, not asserted (timing targets belong in benchmarks).
		run(ctx, t, "leave the topology view", chromedp.Navigate(base+"#traffic"))
		ectx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		ms, err := chromedp.Run(ectx, chromedp.Evaluate[float64](draw100Pods))
		if err != nil {
			t.Fatal(err)
		}
		n, err := chromedp.Run(ectx, chromedp.Evaluate[int](`document.querySelectorAll("#topo-graph circle.pod").length`))
		if err != nil || n != 100 {
			t.Fatalf("drew %d pods (%v), want 100", n, err)
		}
		t.Logf("drawing a 100-pod topology takes %.1f ms in the page", ms)
	})

	t.Run("events", func(t *testing.T) {
		// The stream shows the lab's history, and the filter narrows it.
		run(ctx, t, "open the events",
			chromedp.Navigate(base+"#events"),
			chromedp.WaitVisible(chromedp.CSS("#events")),
		)
		waitText(ctx, t, "#events", "pod.created", "pod.ready", "lab.up", "traffic.sent")
		run(ctx, t, "filter the events", chromedp.SendKeys(chromedp.CSS("#events-filter"), "backend-v2"))
		text := waitText(ctx, t, "#events tbody", "backend-v2")
		if strings.Contains(text, "frontend-v1 created") {
			t.Errorf("filter backend-v2 still shows frontend-v1's events:\n%s", text)
		}
		screenshot(ctx, t, "dashboard-events")
	})
}

// renderMarkdownProbe renders hostile markdown and summarises the nodes it made.
const renderMarkdownProbe = `(() => {
  const md = "# Step <b>one</b>\n\nRun ` + "`apply`" + ` then\nsee [docs](/docs).\n\n- first <img src=x onerror=alert(1)>\n- second\n  item continued\n\n` +
	"```yaml\\nkind: VirtualService\\n<script>alert(2)</script>\\n```" + `\n[bad](javascript:alert) link ` + "`kubectl`" + `";
  const box = document.createElement("div");
  box.append(renderMarkdown(md));
  const parts = [...box.children].map((el) => el.tagName.toLowerCase() + ":" +
    (el.tagName === "UL" ? [...el.children].map((li) => li.textContent).join(",") : el.textContent.replace(/\n/g, "\\n")));
  parts.push("code:" + [...box.querySelectorAll("p code")].map((c) => c.textContent).join(","));
  parts.push("a:" + [...box.querySelectorAll("a")].map((a) => a.getAttribute("href")).join(","));
  parts.push("img:" + box.querySelectorAll("img").length, "script:" + box.querySelectorAll("script").length,
    "onerror:" + box.querySelectorAll("[onerror]").length);
  return parts.join("|");
})()`

// expiredCert draws a certificate that expired a minute ago after a failed renewal and
// returns the rotation cell's class and text.
const expiredCert = `(() => {
  state.certJSON = null;
  drawCert({ spiffeID: "spiffe://cluster.local/ns/default/sa/frontend", serial: "01", rotations: 0,
    notBefore: new Date(Date.now() - 3600e3).toISOString(), notAfter: new Date(Date.now() - 60e3).toISOString(),
    rotateAt: new Date(Date.now() - 600e3).toISOString(), error: "CA unreachable" });
  const el = document.getElementById("pod-cert-rotate");
  return el.className + "|" + el.textContent;
})()`

// draw100Pods draws a synthetic 100-pod topology ten times and returns the mean time of
// one draw in milliseconds.
const draw100Pods = `(() => {
  const t = { services: [], pods: [], edges: [] };
  const host = (s) => "svc" + s + ".default.svc.cluster.local";
  for (let s = 0; s < 20; s++) {
    const pods = [];
    for (let i = 0; i < 5; i++) {
      const n = "p" + s + "-" + i;
      pods.push(n);
      t.pods.push({ name: n, namespace: "default", ip: "10.244.0." + (s * 5 + i), ready: true, epoch: 0 });
    }
    t.services.push({ name: "svc" + s, namespace: "default", hostname: host(s), vip: "10.96.0." + s, ports: [80], pods });
  }
  for (let s = 0; s < 19; s++) for (let i = 0; i < 5; i++) t.edges.push({ from: "p" + s + "-" + i, to: host(s + 1), rps: 1, errorRate: 0, mtls: false });
  const start = performance.now();
  for (let k = 0; k < 10; k++) drawTopology(t);
  return (performance.now() - start) / 10;
})()`

// invalidPA is refused: a mesh-wide PeerAuthentication (no selector) cannot set
// port-level mTLS.
const invalidPA = `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata:
  name: pa-bad
  namespace: default
spec:
  mtls: {mode: PERMISSIVE}
  portLevelMtls:
    8080: {mode: DISABLE}
`

// permissivePA is valid and changes nothing the lab does (PERMISSIVE is the default).
const permissivePA = `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: default}
spec:
  mtls: {mode: PERMISSIVE}
`

// backendTimeoutVS changes frontend-v1's routes, so the control plane pushes to it.
const backendTimeoutVS = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: backend, namespace: default}
spec:
  hosts: [backend]
  http:
  - timeout: 3s
    route:
    - destination: {host: backend}
`

// TestDashboardSecurityInBrowser drives the dashboard of the mTLS lab in headless
// Chromium: the edge frontend -> backend is marked mTLS, the pod page shows the
// certificate with its SPIFFE ID, a hold-push fault added from the pod page makes the
// proxy STALE, an invalid PeerAuthentication shows its field error at the field's line,
// and the events view filters the security events.
func TestDashboardSecurityInBrowser(t *testing.T) { //nolint:tparallel // the subtests drive one lab and one browser, in order
	testutil.RequireRoot(t)
	chromium := findChromium(t)
	t.Parallel()
	l := startLab(t, "testdata/mtls.yaml", "--listen", "127.0.0.1:0")
	login := waitDashboardURL(t, l)
	ctx := newBrowser(t, chromium)
	base := strings.Split(login, "?")[0]
	run(ctx, t, "log in", chromedp.Navigate(login), chromedp.WaitVisible(chromedp.CSS("#topo-graph svg")))

	apply := func(t *testing.T, yaml string) {
		t.Helper()
		run(ctx, t, "apply in the editor",
			chromedp.Navigate(base+"#config"),
			chromedp.WaitVisible(chromedp.CSS("#config-yaml")),
			chromedp.SetValue(chromedp.CSS("#config-yaml"), yaml),
			chromedp.Click(chromedp.CSS("#config-apply")),
		)
	}

	t.Run("mTLS edge", func(t *testing.T) {
		run(ctx, t, "send traffic",
			chromedp.Navigate(base+"#traffic"),
			chromedp.WaitVisible(chromedp.CSS("#traffic-form")),
			chromedp.SetValue(chromedp.CSS("#traffic-pod"), "frontend-v1"),
			chromedp.SetValue(chromedp.CSS("#traffic-url"), "http://backend:8080/"),
			chromedp.SetValue(chromedp.CSS("#traffic-n"), "20"),
			chromedp.Click(chromedp.CSS(`#traffic-form button[type=submit]`)),
		)
		waitText(ctx, t, "#traffic-result", "200", "p50")
		run(ctx, t, "open the topology", chromedp.Navigate(base+"#topology"))
		waitText(ctx, t, "#topo-graph", "mTLS")
		run(ctx, t, "find the mTLS edge", chromedp.WaitVisible(chromedp.CSS(`#topo-graph path.edge.mtls[data-from="frontend-v1"][data-to="backend.default.svc.cluster.local"]`)))
		screenshot(ctx, t, "dashboard-mtls-edge")
	})

	t.Run("certificate", func(t *testing.T) {
		run(ctx, t, "open frontend-v1", chromedp.Navigate(base+"#pods/frontend-v1"))
		waitText(ctx, t, "#pod-cert", "spiffe://cluster.local/ns/default/sa/frontend", "serial", "not after")
		waitText(ctx, t, "#pod-cert-rotate", "rotates in")
		screenshot(ctx, t, "dashboard-pod-certificate")
		// An expired certificate shows in red with the reason (drawn from a synthetic one:
		// the lab renews real ones long before).
		ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		got, err := chromedp.Run(ectx, chromedp.Evaluate[string](expiredCert))
		if err != nil || !strings.Contains(got, "error expired|EXPIRED") || !strings.Contains(got, "CA unreachable") {
			t.Errorf("expired certificate shows %q (%v); want EXPIRED in red with the reason", got, err)
		}
	})

	t.Run("hold-push", func(t *testing.T) {
		run(ctx, t, "add hold-push from the pod page",
			chromedp.Navigate(base+"#pods/frontend-v1"),
			chromedp.WaitVisible(chromedp.CSS("#pod-fault-add")),
			chromedp.SetValue(chromedp.CSS("#pod-fault-kind"), "hold-push"),
			chromedp.Click(chromedp.CSS("#pod-fault-add")),
		)
		waitText(ctx, t, "#pod-fault-msg", "added")
		waitText(ctx, t, "#pod-faults", "hold-push")
		apply(t, backendTimeoutVS)
		// The typed change comes back worded as kubectl words it.
		waitText(ctx, t, "#config-msg", "applied: VirtualService default/backend")
		run(ctx, t, "back to frontend-v1", chromedp.Navigate(base+"#pods/frontend-v1"))
		waitText(ctx, t, "#pod-xds-state", "STALE")
		waitText(ctx, t, "#pod-xds", "STALE")
		screenshot(ctx, t, "dashboard-hold-push-stale")
		run(ctx, t, "clear the fault", chromedp.Click(chromedp.CSS("#pod-fault-clear")))
		waitText(ctx, t, "#pod-xds-state", "SYNCED")
		waitText(ctx, t, "#pod-history", "VirtualService default/backend")
		// The history's newest two versions are picked: their diff shows the new route.
		run(ctx, t, "diff the last two versions", chromedp.Click(chromedp.CSS("#hist-diff")))
		waitText(ctx, t, "#pod-diff", "v1 → v2", "RDS")
		screenshot(ctx, t, "dashboard-xds-diff")
	})

	t.Run("invalid PeerAuthentication", func(t *testing.T) {
		apply(t, invalidPA)
		waitText(ctx, t, "#config-errors", "PeerAuthentication default/pa-bad", "spec.portLevelMtls", "line 8")
		waitText(ctx, t, "#config-highlight .hl-line", "portLevelMtls")
		screenshot(ctx, t, "dashboard-config-pa-error")
	})

	t.Run("security events", func(t *testing.T) {
		apply(t, permissivePA)
		waitText(ctx, t, "#config-msg", "applied")
		run(ctx, t, "open the events",
			chromedp.Navigate(base+"#events"),
			chromedp.WaitVisible(chromedp.CSS("#events")),
		)
		waitText(ctx, t, "#events", "policy.applied", "fault.added", "fault.cleared")
		ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := chromedp.Run(ectx, chromedp.Evaluate[bool](`(() => { const k = document.getElementById("events-kind");
  k.value = "@security"; k.dispatchEvent(new Event("change")); return k.value === "@security"; })()`)); err != nil {
			t.Fatalf("filter the security events: %v", err)
		}
		text := waitText(ctx, t, "#events tbody", "policy.applied", "PeerAuthentication default/default")
		if strings.Contains(text, "fault.added") || strings.Contains(text, "pod.created") {
			t.Errorf("the security filter shows other events:\n%s", text)
		}
		screenshot(ctx, t, "dashboard-security-events")
	})
}

// startGuidedLab runs `meshlab lab start NAME` with the dashboard on a free port and
// returns its login URL and the lab's name once the first step is shown; cleanup stops
// it and checks that nothing is left.
func startGuidedLab(t *testing.T, labName string) (string, string) {
	t.Helper()
	name := testutil.UniqueName(t)
	out := startLabGuide(t, name, labName, "127.0.0.1:0")
	u := dashboardURL.FindString(out.String())
	if u == "" {
		t.Fatalf("lab start printed no dashboard URL:\n%s", out.String())
	}
	return u, name
}

// TestDashboardLabGuideInBrowser walks the retries lab from the guide panel beside the
// topology: the first step's instructions, Check passing it, Next, Check failing the
// second step with what it saw and a hint, then Solve passing it.
func TestDashboardLabGuideInBrowser(t *testing.T) {
	testutil.RequireRoot(t)
	chromium := findChromium(t)
	t.Parallel()
	login, name := startGuidedLab(t, "retries")
	ctx := newBrowser(t, chromium)
	run(ctx, t, "open the dashboard", chromedp.Navigate(login), chromedp.WaitVisible(chromedp.CSS("#guide")))
	waitText(ctx, t, "#guide", "Hide a flaky backend with retries", "Step 1 of 2: the flaky service fails", "Send twenty requests to flaky")
	waitText(ctx, t, "#guide-instructions pre", "meshlab exec client -- curl")
	waitText(ctx, t, "#topo-graph", "client", "flaky")

	// Step 1's task is to send requests: before, its check fails; after, it passes.
	run(ctx, t, "check step 1 before its task", chromedp.Click(chromedp.CSS("#guide-check")))
	waitText(ctx, t, "#guide-msg", "Step 1 is not done yet.")
	for range 20 {
		if out, err := meshlab(t, "exec", "--name", name, "client", "--", "curl", "-s", "-o", "/dev/null", "http://flaky:8080/"); err != nil {
			t.Fatalf("exec curl: %v\n%s", err, out)
		}
	}
	run(ctx, t, "check step 1", chromedp.Click(chromedp.CSS("#guide-check")))
	waitText(ctx, t, "#guide-msg", "Step 1 passed.")
	waitText(ctx, t, "#guide-results li.check.pass", "PASS", "saw", "want")
	screenshot(ctx, t, "dashboard-guide-step1-pass")

	run(ctx, t, "go to step 2", chromedp.Click(chromedp.CSS("#guide-next")))
	waitText(ctx, t, "#guide-step", "Step 2 of 2: retries hide the failures")
	// The instructions' code span is rendered as code.
	waitText(ctx, t, "#guide-instructions code", "retries: {attempts: 4, retryOn: 5xx}")
	mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if got, err := chromedp.Run(mctx, chromedp.Evaluate[string](`document.getElementById("guide-results").textContent + document.getElementById("guide-msg").textContent`)); err != nil || got != "" {
		t.Errorf("a new step still shows the last check's outcome %q (%v)", got, err)
	}

	// Its task is not done: Check fails with what it saw, what it wants and a hint.
	run(ctx, t, "check step 2", chromedp.Click(chromedp.CSS("#guide-check")))
	waitText(ctx, t, "#guide-msg", "Step 2 is not done yet.")
	waitText(ctx, t, "#guide-results li.check.fail", "FAIL", "status", "answers 200", "want", "hint:")
	screenshot(ctx, t, "dashboard-guide-step2-fail")

	// Solve applies the VirtualService with retries and checks again: PASS.
	run(ctx, t, "solve step 2", chromedp.Click(chromedp.CSS("#guide-solve")))
	waitText(ctx, t, "#guide-msg", "Step 2 passed.")
	text := waitText(ctx, t, "#guide-results", "PASS", "upstream_rq_retry")
	if strings.Contains(text, "FAIL") {
		t.Errorf("after Solve a check still fails:\n%s", text)
	}
	ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if disabled, err := chromedp.Run(ectx, chromedp.Evaluate[bool](`document.getElementById("guide-next").disabled`)); err != nil || !disabled {
		t.Errorf("Next on the last step: disabled = %v (%v), want disabled", disabled, err)
	}
	screenshot(ctx, t, "dashboard-guide-step2-solved")
}

// evalJS evaluates expr in the page and returns its value.
func evalJS[T any](ctx context.Context, t *testing.T, expr string) T {
	t.Helper()
	ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ectx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitJS polls expr until it evaluates to true.
func waitJS(ctx context.Context, t *testing.T, what, expr string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		ectx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ok, err := chromedp.Run(ectx, chromedp.Evaluate[bool](expr))
		cancel()
		if err == nil && ok {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	body := evalJS[string](ctx, t, `document.querySelector("main").innerText`)
	t.Fatalf("%s: never true: %s\npage text:\n%s", what, expr, body)
}

// labelLayout checks the topology's edge labels: none overlaps a service box, another
// label, or the last 16 px before its edge's arrowhead. It returns "" or the problems.
const labelLayout = `(() => {
  const rect = (el) => { const b = el.getBBox(); return { x: b.x, y: b.y, w: b.width, h: b.height }; };
  const over = (a, b) => a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
  const boxes = [...document.querySelectorAll("#topo-graph g.svc rect")].map(rect);
  const labels = [...document.querySelectorAll("#topo-graph g.edge-label-box")].map((g) => ({ r: rect(g.querySelector("rect")), to: g.dataset.to, text: g.textContent }));
  const problems = [];
  labels.forEach((l, i) => {
    boxes.forEach((b) => { if (over(l.r, b)) problems.push(l.text + " covers a service box"); });
    labels.slice(i + 1).forEach((m) => { if (over(l.r, m.r)) problems.push(l.text + " covers " + m.text); });
    const target = document.querySelector('#topo-graph g.svc[data-service="' + l.to + '"] rect');
    if (target && l.r.x < rect(target).x && l.r.x + l.r.w > rect(target).x - 16) problems.push(l.text + " runs into the arrowhead at " + l.to);
  });
  if (!labels.length) problems.push("no edge label");
  return problems.join("; ");
})()`

// TestDashboardHealthInBrowser drives the dashboard of a lab with a healthy service, a
// failing one (about 67 % 503s), one behind a fault delay and one behind a fault abort, in headless Chromium at
// 1400x900: the traffic tool proposes a client calling another service and names who
// answered, with the errors in red; the failing edges (app 503s, fault aborts) are red and the healthy one green,
// with labels clear of boxes and arrowheads; the events show one row per change; the SDS
// column shows each proxy's secrets; a trace puts the fault delay on the fault; no Go map
// text appears anywhere; and after `meshlab down` the page shows the lab dead, with no
// pod left green. Screenshots are kept with MESHLAB_KEEP_SCREENSHOTS=1.
func TestDashboardHealthInBrowser(t *testing.T) { //nolint:tparallel // the subtests drive one lab and one browser, in order
	testutil.RequireRoot(t)
	chromium := findChromium(t)
	t.Parallel()
	l := startLab(t, "testdata/dashboard-health.yaml", "--listen", "127.0.0.1:0")
	login := waitDashboardURL(t, l)
	ctx := newBrowser(t, chromium)
	base := strings.Split(login, "?")[0]
	run(ctx, t, "log in", chromedp.Navigate(login), chromedp.WaitVisible(chromedp.CSS("#topo-graph svg")))

	send := func(t *testing.T, url string, n int) {
		t.Helper()
		run(ctx, t, "send traffic to "+url,
			chromedp.Navigate(base+"#traffic"),
			chromedp.WaitVisible(chromedp.CSS("#traffic-form")),
			chromedp.SetValue(chromedp.CSS("#traffic-url"), url),
			chromedp.SetValue(chromedp.CSS("#traffic-n"), strconv.Itoa(n)),
			chromedp.Click(chromedp.CSS(`#traffic-form button[type=submit]`)),
		)
		waitText(ctx, t, "#traffic-latency", strconv.Itoa(n)+" sent")
	}

	t.Run("traffic tool", func(t *testing.T) {
		// The tool proposes the client's own upstream, never a pod calling itself.
		run(ctx, t, "open the traffic tool", chromedp.Navigate(base+"#traffic"), chromedp.WaitVisible(chromedp.CSS("#traffic-form")))
		waitJS(ctx, t, "defaults", `document.getElementById("traffic-pod").value === "client" && document.getElementById("traffic-url").value === "http://good:8080/"`)
		send(t, "http://flaky:8080/", 30)
		waitText(ctx, t, "#traffic-answers", "flaky-v1", "503", "200")
		// 503s and the failure count are red; nothing says "(no pod field)".
		if got := evalJS[string](ctx, t, `[...document.querySelectorAll("#traffic-statuses td.bad, #traffic-answers td.bad")].map((td) => td.textContent).join(",")`); !strings.Contains(got, "503") {
			t.Errorf("503 is not shown as an error: red cells %q", got)
		}
		waitText(ctx, t, "#traffic-latency .bad", "failed")
		if text := evalJS[string](ctx, t, `document.getElementById("traffic-result").textContent`); strings.Contains(text, "no pod field") {
			t.Errorf("the result does not name who answered:\n%s", text)
		}
		screenshot(ctx, t, "dashboard-health-traffic")
		send(t, "http://good:8080/", 30)
		waitText(ctx, t, "#traffic-answers", "good-v1", "200")
		// A fault abort is the client's sidecar answering: the answers say so.
		send(t, "http://aborted:8080/", 20)
		waitText(ctx, t, `#traffic-answers tr[data-by="sidecar"]`, "the sidecar itself", "503", "20")
	})

	t.Run("edges", func(t *testing.T) {
		run(ctx, t, "open the topology", chromedp.Navigate(base+"#topology"), chromedp.WaitVisible(chromedp.CSS("#topo-graph svg")))
		run(ctx, t, "the failing edge is red",
			chromedp.WaitVisible(chromedp.CSS(`#topo-graph path.edge.bad[data-from="client"][data-to="flaky.default.svc.cluster.local"]`)))
		run(ctx, t, "the edge of fault aborts is red (Istio's request metrics, not the cluster stats, count them)",
			chromedp.WaitVisible(chromedp.CSS(`#topo-graph path.edge.bad[data-from="client"][data-to="aborted.default.svc.cluster.local"]`)))
		run(ctx, t, "the healthy edge is green",
			chromedp.WaitVisible(chromedp.CSS(`#topo-graph path.edge.ok[data-from="client"][data-to="good.default.svc.cluster.local"]`)))
		colours := evalJS[string](ctx, t, `["flaky", "good"].map((s) => getComputedStyle(document.querySelector('#topo-graph path.edge[data-to="' + s + '.default.svc.cluster.local"]')).stroke).join("|")`)
		if parts := strings.Split(colours, "|"); len(parts) != 2 || parts[0] == parts[1] {
			t.Errorf("the failing and the healthy edge are drawn alike: %q", colours)
		}
		waitJS(ctx, t, "the failing edge's label", `/\d+% 5xx/.test(document.querySelector('#topo-graph g.edge-label-box[data-to="flaky.default.svc.cluster.local"]').textContent)`)
		if problems := evalJS[string](ctx, t, labelLayout); problems != "" {
			t.Errorf("edge labels: %s", problems)
		}
		waitText(ctx, t, "#topo-legend", "≥ 20% 5xx", "1–20% 5xx", "< 1% 5xx")
		screenshot(ctx, t, "dashboard-health-topology")
	})

	t.Run("events", func(t *testing.T) {
		run(ctx, t, "apply a VirtualService",
			chromedp.Navigate(base+"#config"),
			chromedp.WaitVisible(chromedp.CSS("#config-yaml")),
			chromedp.SetValue(chromedp.CSS("#config-yaml"), goodTimeoutVS),
			chromedp.Click(chromedp.CSS("#config-apply")),
		)
		waitText(ctx, t, "#config-msg", "applied")
		run(ctx, t, "open the events", chromedp.Navigate(base+"#events"), chromedp.WaitVisible(chromedp.CSS("#events")))
		// One row for the change, counting the pushes to the 4 proxies and their ACKs.
		waitText(ctx, t, `#events tr.change-row`, "VirtualService default/good created", "pushed", "to 5 proxies", "ACKed")
		if n := evalJS[int](ctx, t, `document.querySelectorAll('#events tbody tr[data-kind^="xds."]').length`); n != 0 {
			t.Errorf("%d xDS rows in the grouped view, want them inside their change", n)
		}
		pushed := evalJS[int](ctx, t, `(() => { const r = [...document.querySelectorAll("#events tr.change-row")].find((tr) => tr.textContent.includes("default/good created")); return Number(r.dataset.pushed); })()`)
		if pushed < 5 {
			t.Errorf("the change counts %d pushes, want one or more to each of 5 proxies", pushed)
		}
		// Expanded, it lists each proxy's pushes.
		run(ctx, t, "expand the change", chromedp.Click(chromedp.CSS(`#events tr.change-row details.change summary`)))
		waitText(ctx, t, `#events tr.change-row details.change[open] ul.change-pods`, "client", "flaky-v1", "good-v1", "slow-v1", "RouteConfiguration")
		// Ungrouped, the same events are rows of their own again.
		run(ctx, t, "ungroup", chromedp.Click(chromedp.CSS("#events-group")))
		waitJS(ctx, t, "raw xDS rows", `document.querySelectorAll('#events tbody tr[data-kind="xds.pushed"]').length >= 4`)
		run(ctx, t, "group again", chromedp.Click(chromedp.CSS("#events-group")))
		waitText(ctx, t, "#events tbody", "traffic.sent", "503 ×")
		screenshot(ctx, t, "dashboard-health-events")
	})

	t.Run("SDS", func(t *testing.T) {
		run(ctx, t, "open the config view", chromedp.Navigate(base+"#config"), chromedp.WaitVisible(chromedp.CSS("#config-proxies")))
		waitJS(ctx, t, "an SDS cell per proxy", `document.querySelectorAll("#config-proxies td[data-sds]").length === 5`)
		cells := evalJS[string](ctx, t, `[...document.querySelectorAll("#config-proxies td[data-sds]")].map((td) => td.className + " " + td.textContent).join("|")`)
		for _, c := range strings.Split(cells, "|") {
			if !strings.HasPrefix(c, "ok ACTIVE default ") || !strings.Contains(c, "ROOTCA") {
				t.Errorf("SDS cell %q, want the proxy's default certificate and ROOTCA", c)
			}
		}
	})

	t.Run("trace fault delay", func(t *testing.T) {
		// The pod page proposes a call from its pod: the client's own upstream.
		run(ctx, t, "open the client's page", chromedp.Navigate(base+"#pods/client"), chromedp.WaitVisible(chromedp.CSS("#trace-form")))
		waitJS(ctx, t, "the trace target defaults to the client's upstream", `document.getElementById("trace-target").value === "http://good:8080/"`)
		run(ctx, t, "trace client -> slow",
			chromedp.SetValue(chromedp.CSS("#trace-target"), "http://slow:8080/"),
			chromedp.Click(chromedp.CSS(`#trace-form button[type=submit]`)),
		)
		waitText(ctx, t, "#trace-result .trace-summary", "status 200", "fault delay injected by client's sidecar")
		text := waitText(ctx, t, `#trace-hops li.hop-proxy tr[data-field="fault delay"]`, "injected by this sidecar's fault filter", "VirtualService default/slow")
		ms := regexp.MustCompile(`≈(\d+) ms`).FindStringSubmatch(text)
		if ms == nil {
			t.Fatalf("the fault delay row gives no duration: %q", text)
		}
		if d, _ := strconv.Atoi(ms[1]); d < 250 || d > 2000 {
			t.Errorf("fault delay ≈%d ms, want about the configured 300 ms", d)
		}
		up := waitText(ctx, t, `#trace-hops li.hop-proxy tr[data-field="upstream time"]`, "counted from after the fault filter's ≈"+ms[1]+" ms delay")
		// As Envoy's router, the sidecar counts the upstream's time after the fault delay.
		if m := regexp.MustCompile(`(\d+) ms as the sidecar reported it`).FindStringSubmatch(up); m == nil {
			t.Errorf("the upstream time row gives no duration: %q", up)
		} else if u, _ := strconv.Atoi(m[1]); u >= 250 {
			t.Errorf("x-envoy-upstream-service-time %d ms includes the 300 ms fault delay: %q", u, up)
		}
		screenshot(ctx, t, "dashboard-health-trace")
	})

	t.Run("no Go map text", func(t *testing.T) {
		for _, view := range []string{"events", "traffic", "topology", "config"} {
			run(ctx, t, "open "+view, chromedp.Navigate(base+"#"+view))
			if got := evalJS[bool](ctx, t, `document.body.textContent.includes("map[")`); got {
				t.Errorf("Go map text on the %s view: %s", view, evalJS[string](ctx, t, `document.body.textContent.match(/.{0,60}map\[.{0,40}/)[0]`))
			}
		}
	})

	t.Run("dead lab", func(t *testing.T) {
		run(ctx, t, "open the topology", chromedp.Navigate(base+"#topology"), chromedp.WaitVisible(chromedp.CSS("#topo-graph svg")))
		waitJS(ctx, t, "pods ready", `document.querySelectorAll("#topo-graph circle.pod.ready").length === 5`)
		if out, err := meshlab(t, "down", "--name", l.name); err != nil {
			t.Fatalf("meshlab down: %v\n%s", err, out)
		}
		waitText(ctx, t, "#lab-banner", "is down", l.name)
		waitJS(ctx, t, "the topology greyed", `document.body.classList.contains("lab-dead") && document.querySelector("#topo-graph svg").classList.contains("dead")`)
		if n := evalJS[int](ctx, t, `document.querySelectorAll("#topo-graph circle.pod.ready, #topo-graph path.edge.ok, #topo-graph path.edge.bad, #topo-pods td.ok").length`); n != 0 {
			t.Errorf("%d elements still show health after down", n)
		}
		if n := evalJS[int](ctx, t, `document.querySelectorAll("#topo-graph circle.pod.unknown").length`); n != 5 {
			t.Errorf("%d pods shown unknown, want 5", n)
		}
		waitText(ctx, t, "#conn", "lab down")
		screenshot(ctx, t, "dashboard-health-dead")
	})
}

// goodTimeoutVS sets a timeout on good's routes: a change pushed to every proxy.
const goodTimeoutVS = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: good, namespace: default}
spec:
  hosts: [good]
  http:
  - timeout: 3s
    route:
    - destination: {host: good}
`

// TestDashboardLabGoneInBrowser kills the lab process (SIGKILL: no lab.down event, no
// goodbye) under an open dashboard: the page finds the lab gone, says so in a banner and
// greys the topology, with no pod left green.
func TestDashboardLabGoneInBrowser(t *testing.T) {
	testutil.RequireRoot(t)
	chromium := findChromium(t)
	t.Parallel()
	l := startLab(t, "--listen", "127.0.0.1:0")
	login := waitDashboardURL(t, l)
	ctx := newBrowser(t, chromium)
	run(ctx, t, "log in", chromedp.Navigate(login), chromedp.WaitVisible(chromedp.CSS("#topo-graph svg")))
	waitJS(ctx, t, "pods ready", `document.querySelectorAll("#topo-graph circle.pod.ready").length === 3`)
	if err := l.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-l.exited
	waitText(ctx, t, "#lab-banner", "is down", "its process is gone")
	waitJS(ctx, t, "every pod unknown", `document.querySelectorAll("#topo-graph circle.pod.unknown").length === 3 && !document.querySelector("#topo-graph circle.pod.ready, #topo-pods td.ok")`)
	screenshot(ctx, t, "dashboard-lab-gone")
}

// TestDashboardIngressInBrowser runs a guided lab with an ingress gateway
// (testdata/ingress-lab.yaml) and drives it from the host as an attendee would: the
// gateway is drawn as a gateway at the entry, requests through `meshlab port-forward`
// draw a host node with an edge to the gateway and the gateway's edge to the frontend
// (counted from istio_requests_total), the frontend's pod page lists its
// istio_requests_total rows and request duration percentiles, and the guide panel shows
// the step's command and, once its check passes, that the lab is done and how to stop it.
func TestDashboardIngressInBrowser(t *testing.T) {
	testutil.RequireRoot(t)
	chromium := findChromium(t)
	t.Parallel()
	const (
		gwHost = "istio-ingressgateway.istio-system.svc.cluster.local"
		feHost = "frontend.default.svc.cluster.local"
		hostNd = "host (port-forward)"
	)
	login, name := startGuidedLab(t, "testdata/ingress-lab.yaml")
	ctx := newBrowser(t, chromium)
	run(ctx, t, "open the dashboard", chromedp.Navigate(login), chromedp.WaitVisible(chromedp.CSS("#guide")))
	waitText(ctx, t, "#guide", "Enter the mesh through the ingress gateway", "Step 1 of 1: send requests from the host")
	waitText(ctx, t, "#guide-tasks", "istio-ingressgateway.istio-system:80")

	// The gateway: its service box tagged "gateway", its pod a diamond, left of every
	// other service before any traffic.
	waitJS(ctx, t, "the gateway drawn as a gateway", `(() => {
		const g = document.querySelector('#topo-graph g.svc.gateway[data-service="`+gwHost+`"]');
		return !!g && g.textContent.includes("gateway") && !!g.querySelector('path.pod.gateway[data-pod^="istio-ingressgateway-"]');
	})()`)
	if left := evalJS[bool](ctx, t, `(() => {
		const x = (g) => Number(g.querySelector("rect").getAttribute("x"));
		const gw = x(document.querySelector('#topo-graph g.svc[data-service="`+gwHost+`"]'));
		return [...document.querySelectorAll("#topo-graph g.svc")].every((g) => x(g) >= gw);
	})()`); !left {
		t.Error("the gateway is not in the leftmost column")
	}
	if n := evalJS[int](ctx, t, `document.querySelectorAll('#topo-graph path.pod.gateway').length`); n != 1 {
		t.Errorf("%d pods drawn as gateways, want 1 (istio-ingressgateway only)", n)
	}

	// Before the traffic the step is not done, and the panel says nothing about done.
	run(ctx, t, "check before the traffic", chromedp.Click(chromedp.CSS("#guide-check")))
	waitText(ctx, t, "#guide-msg", "Step 1 is not done yet.")
	if hidden := evalJS[bool](ctx, t, `document.getElementById("guide-done").hidden`); !hidden {
		t.Error("guide shows done before the step passed")
	}

	addr := portForward(t, name, "80")
	client := &http.Client{Timeout: 10 * time.Second}
	ok := 0
	for i := 0; i < 40 && ok < 10; i++ {
		resp, err := client.Get("http://" + addr + "/")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				ok++
				continue
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	if ok < 10 {
		t.Fatalf("only %d of 10 requests through port-forward %s answered 200", ok, addr)
	}

	// The host box, left of the gateway, with its edge to the gateway; the gateway's edge
	// to the frontend, counted from the gateway's istio_requests_total.
	waitJS(ctx, t, "host and gateway edges", `(() => {
		const host = document.querySelector('#topo-graph path.edge[data-from="`+hostNd+`"][data-to="`+gwHost+`"]');
		const gw = document.querySelector('#topo-graph path.edge[data-from^="istio-ingressgateway-"][data-to="`+feHost+`"]');
		return !!host && !!gw && !!document.querySelector('#topo-graph g.svc.host');
	})()`)
	// The frontend's sidecar reports Istio's metrics: its edge to the backend is counted
	// from them, as Istio's docs query the mesh.
	// The edge may first be drawn from the cluster stats: Envoy counts upstream_rq_total
	// when the request goes out, the istio.stats filter when its stream ends, and a
	// sample can fall between the two.
	waitJS(ctx, t, "frontend -> backend edge counted from istio_requests_total", `(() => {
		const e = document.querySelector('#topo-graph path.edge[data-from="frontend-v1"][data-to="backend.default.svc.cluster.local"] title');
		return !!e && e.textContent.includes("counted from istio_requests_total");
	})()`)
	if left := evalJS[bool](ctx, t, `(() => {
		const x = (id) => Number(document.querySelector('#topo-graph g.svc[data-service="' + id + '"] rect').getAttribute("x"));
		return x("`+hostNd+`") < x("`+gwHost+`") && x("`+gwHost+`") < x("`+feHost+`");
	})()`); !left {
		t.Error("want host, gateway, frontend from left to right")
	}
	// The host edge carries at least the ten requests (the API's counters, from the
	// gateway's downstream_rq_total less the sidecars' share).
	waitJS(ctx, t, "host edge counts the port-forward requests", `(state.topology.edges.find((e) => e.from === "`+hostNd+`") || {requests: 0}).requests >= 10`)
	screenshot(ctx, t, "dashboard-ingress-topology")

	// The last step's check passes: the panel says the lab is done and how to stop it.
	run(ctx, t, "check after the traffic", chromedp.Click(chromedp.CSS("#guide-check")))
	waitText(ctx, t, "#guide-msg", "Step 1 passed.")
	waitText(ctx, t, "#guide-done", "Lab ingress done: 1 of 1 steps passed.", "meshlab down --name "+name, "Ctrl-C")
	screenshot(ctx, t, "dashboard-ingress-guide-done")

	// The frontend's pod page: istio_requests_total as the destination reported the
	// gateway's requests (code 200), and the duration percentiles.
	run(ctx, t, "open frontend-v1's page", chromedp.Navigate(strings.Split(login, "?")[0]+"#pods/frontend-v1"))
	waitJS(ctx, t, "istio_requests_total rows", `!!document.querySelector('#pod-istio-requests tr.istio-request[data-reporter="destination"][data-code="200"]')`)
	text := waitText(ctx, t, "#pod-istio-requests", "destination", "istio-ingressgateway", "200")
	if !strings.Contains(text, "source") || !strings.Contains(text, "backend") {
		t.Errorf("frontend's istio_requests_total rows lack its own calls to the backend (reporter source):\n%s", text)
	}
	dur := waitText(ctx, t, "#pod-istio-durations", "ms")
	if !regexp.MustCompile(`destination\s*←[^\n]*istio-ingressgateway`).MatchString(dur) {
		t.Errorf("no duration row for the gateway's requests:\n%s", dur)
	}
	screenshot(ctx, t, "dashboard-ingress-pod-istio")
}
