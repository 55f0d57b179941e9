package e2e

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// findFirefox returns Firefox (Debian's firefox-esr), skipping the test when it is
// absent, or failing it when CI=true (make browser installs it).
func findFirefox(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"firefox", "firefox-esr"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("firefox is not installed and CI=true: make browser installs it (apt-get install -y firefox-esr)")
	}
	t.Skip("skipped: firefox is not installed (apt-get install -y firefox-esr, or run make browser)")
	return ""
}

// bidiOrigin is the Origin our websocket client sends; Firefox refuses any Origin it
// was not told to allow.
const bidiOrigin = "http://127.0.0.1"

var bidiListening = regexp.MustCompile(`WebDriver BiDi listening on (ws://\S+)`)

// firefox is a headless Firefox with WebDriver BiDi on a free port and a fresh profile.
type firefox struct {
	out      *syncBuffer
	endpoint chan string // receives the BiDi address once Firefox prints it
	exited   chan struct{}
}

// launchFirefox starts Firefox without waiting for it; cleanup kills it and every
// process it started, and removes its profile and home, even when the test fails.
func launchFirefox(t *testing.T, path string) *firefox {
	t.Helper()
	profile, home := t.TempDir(), t.TempDir() // removed after the cleanup below kills Firefox
	cmd := exec.Command(path, "--headless", "--no-remote",
		"--remote-debugging-port", "0", "--remote-allow-origins", bidiOrigin,
		"--profile", profile, "about:blank")
	cmd.Env = append(os.Environ(), "HOME="+home, "MOZ_CRASHREPORTER_DISABLE=1", "MOZ_HEADLESS=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its content processes join its group
	pr, pw := io.Pipe()
	f := &firefox{out: &syncBuffer{}, endpoint: make(chan string, 1), exited: make(chan struct{})}
	cmd.Stdout = f.out
	cmd.Stderr = io.MultiWriter(f.out, pw)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start firefox: %v", err)
	}
	go func() { _ = cmd.Wait(); pw.Close(); close(f.exited) }()
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := bidiListening.FindStringSubmatch(sc.Text()); m != nil {
				f.endpoint <- m[1]
				break
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-f.exited
		if t.Failed() {
			t.Logf("firefox output:\n%s", f.out.String())
		}
	})
	return f
}

// page waits for Firefox's BiDi endpoint, starts a session and returns its tab with a
// 1400x1000 viewport; cleanup closes the connection.
func (f *firefox) page(t *testing.T) *bidiPage {
	t.Helper()
	var url string
	select {
	case url = <-f.endpoint:
	case <-f.exited:
		t.Fatalf("firefox exited before it listened for WebDriver BiDi:\n%s", f.out.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("firefox did not listen for WebDriver BiDi in 30s:\n%s", f.out.String())
	}
	c, err := dialBiDi(url+"/session", bidiOrigin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := newBiDiPage(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.setViewport(ctx, 1400, 1000); err != nil {
		t.Fatal(err)
	}
	return p
}

// JavaScript run in the page; each returns a string.
const (
	// jsText returns the text of the first element matching the selector, or throws.
	jsText = `(sel) => { const el = document.querySelector(sel); if (!el) throw new Error("no element " + sel); return el.textContent; }`
	// jsVisible returns "yes" when the element exists and has a box on screen.
	jsVisible = `(sel) => { const el = document.querySelector(sel); if (!el) return "no element";
  const r = el.getBoundingClientRect(), s = getComputedStyle(el);
  return r.width > 0 && r.height > 0 && s.visibility !== "hidden" ? "yes" : "hidden"; }`
	// jsSetValue sets a form field's value as chromedp.SetValue does.
	jsSetValue = `(sel, v) => { const el = document.querySelector(sel); if (!el) throw new Error("no element " + sel); el.value = v; return el.value; }`
	// jsClick clicks an element.
	jsClick = `(sel) => { const el = document.querySelector(sel); if (!el) throw new Error("no element " + sel); el.click(); return "ok"; }`
	// jsGo moves the single-page app to a view, as a link would.
	jsGo = `(hash) => { location.hash = hash; return location.href; }`
)

// ffDo runs one page function with a deadline, failing the test on error.
func ffDo(t *testing.T, p *bidiPage, what, fn string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := p.callString(ctx, fn, args...)
	if err != nil {
		t.Fatalf("%s: %v\npage text:\n%s", what, err, ffPageText(p))
	}
	return s
}

// ffPageText returns the text of the page's main element, for failure messages.
func ffPageText(p *bidiPage) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, _ := p.callString(ctx, jsText, "main")
	return s
}

// ffWait polls fn(args) until ok accepts its result, and returns that result.
func ffWait(t *testing.T, p *bidiPage, what string, ok func(string) bool, fn string, args ...string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last string
	var lastErr error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		s, err := p.callString(ctx, fn, args...)
		cancel()
		last, lastErr = s, err
		if err == nil && ok(s) {
			return s
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: not there after 20s (last: %q, %v)\npage text:\n%s", what, last, lastErr, ffPageText(p))
	return ""
}

// ffWaitText polls the text of sel until it contains every want.
func ffWaitText(t *testing.T, p *bidiPage, sel string, want ...string) string {
	t.Helper()
	return ffWait(t, p, sel+" shows "+strings.Join(want, ", "), func(s string) bool {
		for _, w := range want {
			if !strings.Contains(s, w) {
				return false
			}
		}
		return true
	}, jsText, sel)
}

// ffWaitVisible polls until sel is on screen.
func ffWaitVisible(t *testing.T, p *bidiPage, sel string) {
	t.Helper()
	ffWait(t, p, sel+" is visible", func(s string) bool { return s == "yes" }, jsVisible, sel)
}

// ffScreenshot saves a full-page screenshot to test-artifacts/name.png.
func ffScreenshot(t *testing.T, p *bidiPage, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	png, err := p.screenshot(ctx)
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := filepath.Join("..", "test-artifacts")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// TestDashboardInFirefox drives the dashboard of a real hello lab in headless Firefox
// over WebDriver BiDi, with the selectors of TestDashboardInBrowser: the topology shows
// the pods, the traffic tool shows the v1/v2 distribution, an invalid VirtualService
// shows its field error, and the pod page shows the capture rules, the epoch timeline
// and a new live epoch after a restart.
func TestDashboardInFirefox(t *testing.T) {
	testutil.RequireRoot(t)
	path := findFirefox(t)
	// Not parallel (tparallel): its subtests share the test's lab and run one after another.
	start := time.Now()
	ff := launchFirefox(t, path) // starts while the lab comes up
	l := startLab(t, "--listen", "127.0.0.1:0")
	login := waitDashboardURL(t, l)
	labUp := time.Since(start)
	p := ff.page(t)
	t.Logf("lab up after %v, firefox session after %v", labUp.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))

	t.Run("topology", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := p.navigate(ctx, login); err != nil {
			t.Fatalf("open the dashboard: %v", err)
		}
		ffWaitVisible(t, p, "#topo-graph svg")
		if loc := ffDo(t, p, "read the address", `() => location.href`); strings.Contains(loc, "token=") {
			t.Errorf("the token stayed in the address bar: %s", loc)
		}
		ffWaitText(t, p, "#topo-graph", "frontend-v1", "backend-v1", "backend-v2", "backend.default", "frontend.default")
		ffWaitText(t, p, "#topo-pods", "frontend-v1", "backend-v1", "backend-v2")
		ffScreenshot(t, p, "firefox-dashboard-topology")
	})

	t.Run("traffic", func(t *testing.T) {
		// 40 requests from frontend-v1 to backend, split over v1 and v2.
		ffDo(t, p, "open the traffic tool", jsGo, "#traffic")
		ffWaitVisible(t, p, "#traffic-form")
		ffDo(t, p, "choose the pod", jsSetValue, "#traffic-pod", "frontend-v1")
		ffDo(t, p, "enter the URL", jsSetValue, "#traffic-url", "http://backend:8080/")
		ffDo(t, p, "enter the count", jsSetValue, "#traffic-n", "40")
		ffDo(t, p, "send", jsClick, "#traffic-form button[type=submit]")
		ffWaitText(t, p, "#traffic-pods", "backend-v1", "backend-v2")
		ffWaitText(t, p, "#traffic-result", "200", "p50")
		ffScreenshot(t, p, "firefox-dashboard-traffic")
		// The topology draws the edge the traffic made.
		ffDo(t, p, "back to the topology", jsGo, "#topology")
		ffWaitText(t, p, "#topo-graph", "rps")
	})

	t.Run("config", func(t *testing.T) {
		// An invalid VirtualService is refused with the field at fault.
		ffDo(t, p, "open the editor", jsGo, "#config")
		ffWaitVisible(t, p, "#config-yaml")
		ffDo(t, p, "enter the VirtualService", jsSetValue, "#config-yaml", invalidVS)
		ffDo(t, p, "apply", jsClick, "#config-apply")
		ffWaitText(t, p, "#config-errors", "spec.http[0].route[1].weight", "must not be negative")
		ffScreenshot(t, p, "firefox-dashboard-config-error")
	})

	t.Run("pod", func(t *testing.T) {
		// The pod page shows the epoch timeline; restarting the proxy shows epoch 1 live.
		ffDo(t, p, "open backend-v1", jsGo, "#pods/backend-v1")
		ffWaitVisible(t, p, `.epoch.live[data-epoch="0"]`)
		ffWaitText(t, p, "#pod-capture", "ISTIO_OUTPUT", "outbound TCP goes to the virtualOutbound listener")
		ffWaitText(t, p, "#pod-xds", "Cluster", "ACK")
		ffDo(t, p, "restart the proxy", jsClick, "#pod-restart")
		ffWaitText(t, p, "#pod-epochs", "epoch 1")
		ffWaitVisible(t, p, `.epoch.live[data-epoch="1"]`)
		ffScreenshot(t, p, "firefox-dashboard-pod-restart")
	})
}
