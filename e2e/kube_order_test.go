package e2e

import (
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestApplyRouteBeforeServices applies Istio's Gateway API bookinfo-gateway.yaml before
// bookinfo.yaml, an order Kubernetes takes: the HTTPRoute is stored with ResolvedRefs
// False (BackendNotFound) and a lastTransitionTime, which describe prints; the gateway
// answers /productpage with 503 (istiod keeps the missing backend's destination, whose
// cluster does not exist); once bookinfo.yaml is applied, ResolvedRefs is True and the
// page answers 200 through the gateway.
func TestApplyRouteBeforeServices(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	samples := testutil.IstioSamples(t)
	tl := startTaskLabFrom(t, "# a cluster before the task\n")
	out := tl.run("apply", "-f", filepath.Join(samples, "bookinfo/gateway-api/bookinfo-gateway.yaml"))
	if !strings.Contains(out, "httproute.gateway.networking.k8s.io/bookinfo created\n") {
		t.Fatalf("apply bookinfo-gateway.yaml before bookinfo.yaml:\n%s\nwant the HTTPRoute created", out)
	}
	resolved := `jsonpath={.status.parents[0].conditions[?(@.type=="ResolvedRefs")].reason}`
	tl.poll("BackendNotFound", func(s string) bool { return s == "BackendNotFound" }, "get", "httproute", "bookinfo", "-o", resolved)
	rfc3339 := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`)
	if ts := tl.run("get", "httproute", "bookinfo", "-o", `jsonpath={.status.parents[0].conditions[?(@.type=="ResolvedRefs")].lastTransitionTime}`); !rfc3339.MatchString(ts) {
		t.Errorf("ResolvedRefs' lastTransitionTime %q, want an RFC 3339 time", ts)
	}
	if d := tl.run("describe", "httproute", "bookinfo"); strings.Contains(d, "<nil>") || !strings.Contains(d, "Last Transition Time:") {
		t.Errorf("describe httproute bookinfo:\n%s\nwant every Last Transition Time a time, not <nil>", d)
	}
	addr := portForwardSvc(t, tl.name, "default", "svc/bookinfo-gateway-istio", "80")
	page := func() (int, string) {
		resp, err := http.Get("http://" + addr + "/productpage")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitPage := func(want int, what string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			code, body := page()
			if code == want && (want != http.StatusOK || strings.Contains(body, "<title>Simple Bookstore App</title>")) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET /productpage through the gateway: %d\n%s\nwant %d %s", code, body, want, what)
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	waitPage(http.StatusServiceUnavailable, "(the backend's cluster does not exist)")

	tl.run("apply", "-f", filepath.Join(samples, "bookinfo/platform/kube/bookinfo.yaml"))
	tl.poll("ResolvedRefs", func(s string) bool { return s == "ResolvedRefs" }, "get", "httproute", "bookinfo", "-o", resolved)
	waitPage(http.StatusOK, "with Bookinfo's title")
}

// TestExecEndsAsKubectl runs commands with `meshlab exec`, which starts them itself in the
// pod (as the app, or beside the sidecar with -c istio-proxy) and ends as kubectl exec:
// the command's exit code, kubectl's "command terminated with exit code N" after a
// failure, nothing more after a success, the command's stdin passed through.
func TestExecEndsAsKubectl(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, "../scenarios/hello.yaml")
	for _, tc := range []struct {
		flags []string
		argv  []string
		code  int
		out   string
	}{
		{nil, []string{"sh", "-c", "echo app; exit 3"}, 3, "app\ncommand terminated with exit code 3\n"},
		{[]string{"-c", "istio-proxy"}, []string{"sh", "-c", "echo proxy; exit 4"}, 4, "proxy\ncommand terminated with exit code 4\n"},
		{nil, []string{"true"}, 0, ""},
	} {
		out, code := execIn(t, l.name, tc.flags, "frontend-v1", tc.argv...)
		if code != tc.code || out != tc.out {
			t.Errorf("exec %v frontend-v1 -- %v: exit %d\n%q\nwant exit %d\n%q", tc.flags, tc.argv, code, out, tc.code, tc.out)
		}
	}
	cmd := exec.Command(meshlabBin(t), "exec", "--name", l.name, "-i", "frontend-v1", "--", "cat")
	cmd.Stdin = strings.NewReader("through stdin\n")
	if out, err := cmd.CombinedOutput(); err != nil || string(out) != "through stdin\n" {
		t.Errorf("exec -i frontend-v1 -- cat: %v\n%q, want stdin echoed", err, out)
	}
}
