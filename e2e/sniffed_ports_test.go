package e2e

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestSniffedPorts holds meshlab's own generator to istiod's protocol sniffing: a Service
// port that names no protocol is "auto". tcp-echo's port ("echo") carries raw TCP through
// both sidecars (the HTTP inspector finds no request, the listener's default chain proxies
// the bytes to tcp-echo's cluster), where an HTTP connection manager would answer them
// with 400; httpbin's unnamed port still gets HTTP routing (its VirtualService's fault
// aborts a marked request with 418). istioctl proxy-config listeners shows the sniffing
// listener as Istio's: on the service's VIP, an HTTP chain by the route
// "<host>:<port>" and a catch-all chain to the service's cluster.
func TestSniffedPorts(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, "testdata/sniffed-ports.yaml")
	ml := func(args ...string) (string, error) {
		t.Helper()
		return meshlab(t, append([]string{"--lab", l.name}, args...)...)
	}

	// Raw TCP on tcp-echo's "echo" port, one line and its answer.
	out, err := ml("exec", "deploy/curl", "--", "bash", "-c",
		`exec 3<>/dev/tcp/tcp-echo/9000 && echo world >&3 && timeout 5 head -n1 <&3`)
	if err != nil || strings.TrimSpace(out) != "hello world" {
		t.Fatalf("a line to tcp-echo:9000 (port named echo): %v\n%q\nwant tcp-echo's answer \"hello world\"", err, out)
	}

	// HTTP on httpbin's unnamed port, before and with its VirtualService.
	code := func(header string) string {
		t.Helper()
		out, err := ml("exec", "deploy/curl", "--", "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-H", header, "http://httpbin:8000/status/200")
		if err != nil {
			t.Fatalf("curl httpbin:8000 (unnamed port) with %s: %v\n%s", header, err, out)
		}
		return strings.TrimSpace(out)
	}
	if c := code("x-sniff: none"); c != "200" {
		t.Fatalf("HTTP to httpbin's unnamed port: %s, want 200", c)
	}
	if out, err := ml("apply", "--wait", "-f", "testdata/sniffed-ports-vs.yaml"); err != nil {
		t.Fatalf("apply the VirtualService: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for code("x-sniff: teapot") != "418" {
		if time.Now().After(deadline) {
			t.Fatal("30 s after the VirtualService: a request with x-sniff: teapot is not aborted with 418 on httpbin's unnamed port")
		}
		time.Sleep(300 * time.Millisecond)
	}
	if c := code("x-sniff: none"); c != "200" {
		t.Errorf("HTTP to httpbin's unnamed port under its VirtualService, unmarked: %s, want 200", c)
	}
	// And TCP still passes on tcp-echo's port after the push.
	if out, err := ml("exec", "deploy/curl", "--", "bash", "-c",
		`exec 3<>/dev/tcp/tcp-echo/9000 && echo again >&3 && timeout 5 head -n1 <&3`); err != nil || strings.TrimSpace(out) != "hello again" {
		t.Errorf("a line to tcp-echo:9000 after the push: %v\n%q", err, out)
	}

	// The sniffing listener, as istioctl proxy-config listeners prints it.
	pod, err := ml("get", "pods", "-l", "app=curl", "-o", "jsonpath={.items[0].metadata.name}")
	if err != nil {
		t.Fatalf("get pods: %v\n%s", err, pod)
	}
	vip, err := ml("get", "svc", "tcp-echo", "-o", "jsonpath={.spec.clusterIP}")
	if err != nil {
		t.Fatalf("get svc: %v\n%s", err, vip)
	}
	ls, err := ml("pc", "listeners", strings.TrimSpace(pod), "--port", "9000")
	if err != nil {
		t.Fatalf("pc listeners: %v\n%s", err, ls)
	}
	q := regexp.QuoteMeta(strings.TrimSpace(vip))
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^` + q + `\s+9000\s+Trans: raw_buffer; App: \S+\s+Route: tcp-echo\.default\.svc\.cluster\.local:9000$`),
		regexp.MustCompile(`(?m)^` + q + `\s+9000\s+ALL\s+Cluster: outbound\|9000\|\|tcp-echo\.default\.svc\.cluster\.local$`),
	} {
		if !want.MatchString(ls) {
			t.Errorf("pc listeners --port 9000:\n%s\nno line matches %s", ls, want)
		}
	}
}
