package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
)

// TestKubernetesSampleWorkloads loads Deployments written as Istio's samples write them:
// the images choose the apps (httpbin answers as httpbin, curl is a pod to exec into), pod
// names follow Kubernetes, and a request from curl reaches httpbin through both sidecars
// with mTLS (httpbin echoes the client certificate's identity its sidecar forwarded).
func TestKubernetesSampleWorkloads(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, "testdata/kube-samples.yaml")

	c := api.NewUnixClient(lab.PathsFor(lab.DefaultRunRoot, l.name).APISocket())
	defer c.Close()
	pods, err := c.Pods(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var curl string
	for _, p := range pods {
		if strings.HasPrefix(p.Name, "curl-") {
			curl = p.Name
		}
		parts := strings.Split(p.Name, "-")
		if len(parts) != 3 || len(parts[2]) != 5 || !p.Ready {
			t.Errorf("pod %q (ready %v): want a ready Deployment pod named <name>-<hash>-<suffix>", p.Name, p.Ready)
		}
	}
	if curl == "" {
		t.Fatalf("no curl pod among %+v", pods)
	}

	out, err := meshlab(t, "exec", "--name", l.name, curl, "--", "curl", "-sS", "-i", "--max-time", "5", "http://httpbin:8000/status/418")
	if err != nil {
		t.Fatalf("curl /status/418: %v\n%s", err, out)
	}
	if !strings.Contains(out, "418") || !strings.Contains(out, "I'm a teapot!") || !strings.Contains(strings.ToLower(out), "server: envoy") {
		t.Errorf("curl /status/418 from the curl pod:\n%s\nwant go-httpbin's teapot, answered through the sidecar (server: envoy)", out)
	}

	out, err = meshlab(t, "exec", "--name", l.name, curl, "--", "curl", "-sS", "--max-time", "5", "http://httpbin:8000/headers")
	if err != nil {
		t.Fatalf("curl /headers: %v\n%s", err, out)
	}
	var h struct{ Headers map[string][]string } // go-httpbin lists every header's values
	if err := json.Unmarshal([]byte(out), &h); err != nil {
		t.Fatalf("/headers is not go-httpbin's JSON: %v\n%s", err, out)
	}
	if xfcc := strings.Join(h.Headers["X-Forwarded-Client-Cert"], ","); !strings.Contains(xfcc, "URI=spiffe://cluster.local/ns/default/sa/curl") {
		t.Errorf("httpbin saw X-Forwarded-Client-Cert %q; want the curl service account's identity (mTLS between the sidecars)", xfcc)
	}

	out, err = meshlab(t, "get", "--name", l.name, "deploy")
	if err != nil || !strings.Contains(out, "UP-TO-DATE") || !strings.Contains(out, "httpbin") {
		t.Errorf("meshlab get deploy: %v\n%s", err, out)
	}
}

// TestClusterDNSWithoutSidecar: a pod in a namespace without injection (the mtls-migration
// task's "legacy") has no sidecar and no agent, yet resolves Services through the lab's
// cluster DNS as every Kubernetes pod does, with the search list of its own namespace.
func TestClusterDNSWithoutSidecar(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, "testdata/kube-legacy.yaml")
	// kubectl's TYPE/NAME form reaches the Deployment's pod.
	curl := "deploy/curl"
	for _, host := range []string{"httpbin.default", "httpbin.default.svc.cluster.local"} {
		out, err := meshlab(t, "exec", "--name", l.name, curl, "--", "curl", "-sS", "--max-time", "5", "http://"+host+":8000/ip")
		if err != nil || !strings.Contains(out, `"origin"`) {
			t.Errorf("curl http://%s:8000/ip from the legacy pod: %v\n%s", host, err, out)
		}
	}
	// httpbin is not in legacy: the short name finds nothing, as with kubelet's search list.
	out, err := meshlab(t, "exec", "--name", l.name, curl, "--", "curl", "-sS", "--max-time", "5", "http://httpbin:8000/ip")
	if err == nil || !strings.Contains(out, "Could not resolve host") {
		t.Errorf("curl http://httpbin:8000/ip from legacy: %v\n%s\nwant the name not to resolve", err, out)
	}
}

// TestTCPTrafficShifting is Istio's TCP traffic shifting task on the tcp-echo sample: the
// two versions share the traffic until a VirtualService sends all of it to v1.
func TestTCPTrafficShifting(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, "testdata/kube-tcp-echo.yaml")
	// The task's `(date; sleep 1) | nc tcp-echo 9000`, with bash's /dev/tcp for nc.
	echo := func() string {
		t.Helper()
		out, err := meshlab(t, "exec", "--name", l.name, "deploy/curl", "--", "bash", "-c",
			`exec 3<>/dev/tcp/tcp-echo/9000 && date >&3 && timeout 5 head -n1 <&3`)
		if err != nil {
			t.Fatalf("echo through tcp-echo: %v\n%s", err, out)
		}
		word, _, _ := strings.Cut(strings.TrimSpace(out), " ")
		return word
	}
	seen := map[string]int{}
	for range 12 {
		seen[echo()]++
	}
	if seen["one"] == 0 || seen["two"] == 0 || len(seen) != 2 {
		t.Errorf("12 connections without routing were answered %v; want both versions (one, two)", seen)
	}
	if out, err := meshlab(t, "apply", "--wait", "--name", l.name, "-f", "testdata/tcp-echo-all-v1.yaml"); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for inARow := 0; inARow < 6; {
		if w := echo(); w == "one" {
			inARow++
		} else if inARow = 0; time.Now().After(deadline) {
			t.Fatalf("20s after routing all TCP traffic to v1, a connection was still answered %q", w)
		}
	}
}
