package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
)

// Istio's "Egress Gateways" task (HTTP and HTTPS), run as a learner runs it:
// Deployments naming the samples' images, the tasks' Istio objects as the docs write
// them, `kubectl exec` as `meshlab exec`. Each test names the output the task documents.

// podOf returns the name and IP of the first pod in namespace ns whose name starts with
// prefix (the tasks' `kubectl get pod -l app=X -o jsonpath=...`).
func podOf(t *testing.T, labName, ns, prefix string) lab.PodRecord {
	t.Helper()
	rec, err := lab.ReadRecord(lab.PathsFor(lab.DefaultRunRoot, labName))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rec.Pods {
		if p.Namespace == ns && strings.HasPrefix(p.Name, prefix) {
			return p
		}
	}
	t.Fatalf("no pod %s* in namespace %s among %+v", prefix, ns, rec.Pods)
	return lab.PodRecord{}
}

// within retries get until ok accepts its result (policies reach the sidecars over xDS
// after apply returns), for at most 20 s, and fails naming what it waited for.
func within(t *testing.T, what string, get func() string, ok func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out := get()
		if ok(out) {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("20 s after apply, still not %s; last output:\n%s", what, out)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func containsAll(s string, words ...string) bool {
	for _, w := range words {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}

// TestEgressGatewayTask is "Egress Gateways" (HTTP): with the cnn ServiceEntry the curl
// pod gets edition.cnn.com's 301 to https and, following it, HTTP/2 200; the task's
// Gateway brings istio-system/istio-egressgateway, and with its DestinationRule and
// VirtualService the same request still gets 301 then 200, now through the gateway:
// the gateway's access log shows, as the task's does, "GET /politics HTTP/2" 301 (the
// sidecar speaks HTTP/2 to the gateway) sent to outbound|80||edition.cnn.com,
// and the curl sidecar's shows it sent to the gateway's cnn subset.
func TestEgressGatewayTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, "testdata/egress-world.yaml")
	checkWorldIsolated(t, l.name)
	politics := []string{"-sSL", "-o", "/dev/null", "-D", "-", "http://edition.cnn.com/politics"}
	redirected := func(r curlResult) bool {
		return r.code == 0 && containsAll(r.out, "HTTP/1.1 301 Moved Permanently", "location: https://edition.cnn.com/politics", "HTTP/2 200")
	}

	applyYAML(t, l.name, docsCNNEntry) // docs_gateways_test.go: the page's objects
	eventually(t, l.name, "301 to https, then HTTP/2 200", redirected, politics...)

	applyYAML(t, l.name, docsCNNEgressGateway)
	applyYAML(t, l.name, docsCNNThroughEgress)
	// The task's `kubectl logs -l istio=egressgateway -c istio-proxy -n istio-system`:
	// meshlab's logs takes no label selector, so the gateway's Deployment names its pod.
	gwLog := func() string {
		out, err := meshlab(t, "logs", "--name", l.name, "-n", "istio-system", "deploy/istio-egressgateway", "-c", "istio-proxy")
		if err != nil {
			t.Fatalf("meshlab logs -n istio-system deploy/istio-egressgateway -c istio-proxy: %v\n%s", err, out)
		}
		return out
	}
	// The gateway's log names the request once the route through it is in place.
	deadline := time.Now().Add(20 * time.Second)
	var r curlResult
	for {
		r = curlIn(t, l.name, politics...)
		if redirected(r) && containsAll(grepLines(gwLog(), "/politics"), `"GET /politics HTTP/2" 301`, "outbound|80||edition.cnn.com") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("20 s after the gateway's objects: curl exit %d\n%s\nthe egress gateway's log:\n%s\nwant the 301 and 200 and the gateway's log naming GET /politics to outbound|80||edition.cnn.com", r.code, r.out, gwLog())
		}
		time.Sleep(300 * time.Millisecond)
	}
	logs, err := meshlab(t, "logs", "--name", l.name, curlPod(t, l.name), "-c", "proxy")
	if err != nil || !strings.Contains(grepLines(logs, "/politics"), "outbound|80|cnn|istio-egressgateway.istio-system.svc.cluster.local") {
		t.Errorf("curl's sidecar log (err %v) does not show /politics sent to the gateway's cnn subset:\n%s", err, grepLines(logs, "/politics"))
	}
	// HTTPS from the app is not routed through the gateway by this VirtualService: the
	// site still answers it directly.
	if r := curlIn(t, l.name, "-sSI", "https://edition.cnn.com/politics"); !strings.Contains(r.out, "HTTP/2 200") {
		t.Errorf("https://edition.cnn.com/politics: exit %d\n%s", r.code, r.out)
	}
}

// The ServiceEntry, Gateway, DestinationRule and VirtualService of "Egress Gateways",
// section "Egress gateway for HTTPS traffic", as the task writes them.
const (
	egressCNNTLSEntry = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: cnn
spec:
  hosts:
  - edition.cnn.com
  ports:
  - number: 443
    name: tls
    protocol: TLS
  resolution: DNS
`
	egressCNNTLSGateway = `apiVersion: networking.istio.io/v1
kind: Gateway
metadata:
  name: istio-egressgateway
spec:
  selector:
    istio: egressgateway
  servers:
  - port:
      number: 443
      name: tls
      protocol: TLS
    hosts:
    - edition.cnn.com
    tls:
      mode: PASSTHROUGH
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: egressgateway-for-cnn
spec:
  host: istio-egressgateway.istio-system.svc.cluster.local
  subsets:
  - name: cnn
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: direct-cnn-through-egress-gateway
spec:
  hosts:
  - edition.cnn.com
  gateways:
  - mesh
  - istio-egressgateway
  tls:
  - match:
    - gateways:
      - mesh
      port: 443
      sniHosts:
      - edition.cnn.com
    route:
    - destination:
        host: istio-egressgateway.istio-system.svc.cluster.local
        subset: cnn
        port:
          number: 443
  - match:
    - gateways:
      - istio-egressgateway
      port: 443
      sniHosts:
      - edition.cnn.com
    route:
    - destination:
        host: edition.cnn.com
        port:
          number: 443
      weight: 100
`
)

// TestEgressGatewayHTTPSTask is "Egress Gateways", HTTPS: with the TLS ServiceEntry the
// curl pod gets HTTP/2 200 from https://edition.cnn.com/politics; with the task's
// PASSTHROUGH Gateway, DestinationRule and VirtualService of tls routes the curl
// sidecar sends SNI edition.cnn.com to the gateway's cnn subset (the sidecar routes by
// SNI, TLS untouched), and the gateway passes it on to the site: the gateway's access
// log shows, as the task's does, a TCP entry ("- - -") to outbound|443||edition.cnn.com
// on its 8443 with requested server name edition.cnn.com, while curl still verifies
// the site's own certificate and gets HTTP/2 200. Another SNI on port 443 still goes
// out directly (ALLOW_ANY), not through the gateway.
func TestEgressGatewayHTTPSTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, "testdata/egress-world.yaml")
	checkWorldIsolated(t, l.name)
	politics := []string{"-sSL", "-o", "/dev/null", "-D", "-", "https://edition.cnn.com/politics"}

	applyYAML(t, l.name, egressCNNTLSEntry)
	eventually(t, l.name, "HTTP/2 200", statusLine("HTTP/2 200"), politics...)

	applyYAML(t, l.name, egressCNNTLSGateway)
	gwLog := func() string {
		out, err := meshlab(t, "logs", "--name", l.name, "-n", "istio-system", "deploy/istio-egressgateway", "-c", "istio-proxy")
		if err != nil {
			t.Fatalf("meshlab logs -n istio-system deploy/istio-egressgateway -c istio-proxy: %v\n%s", err, out)
		}
		return out
	}
	throughGateway := func() string {
		return grepLines(gwLog(), `"- - -"`, "outbound|443||edition.cnn.com", ":8443 ", " edition.cnn.com ")
	}
	deadline := time.Now().Add(20 * time.Second)
	var r curlResult
	for {
		r = curlIn(t, l.name, politics...)
		if r.code == 0 && strings.Contains(r.out, "HTTP/2 200") && throughGateway() != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("20 s after the gateway's objects: curl exit %d\n%s\nthe egress gateway's log:\n%s\nwant HTTP/2 200 and the gateway's log naming a TCP connection for SNI edition.cnn.com to outbound|443||edition.cnn.com", r.code, r.out, gwLog())
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Logf("the egress gateway's log:\n%s", throughGateway())
	logs, err := meshlab(t, "logs", "--name", l.name, curlPod(t, l.name), "-c", "proxy")
	if err != nil || grepLines(logs, "outbound|443|cnn|istio-egressgateway.istio-system.svc.cluster.local", " edition.cnn.com ") == "" {
		t.Errorf("curl's sidecar log (err %v) shows no connection for SNI edition.cnn.com sent to the gateway's cnn subset:\n%s", err, logs)
	}

	// Another site on 443 is not the VirtualService's: it goes out directly.
	before := throughGateway()
	if r := curlIn(t, l.name, "-sSI", "https://www.google.com"); !strings.Contains(r.out, "HTTP/2 200") {
		t.Errorf("https://www.google.com: exit %d\n%s", r.code, r.out)
	}
	if got := grepLines(gwLog(), "www.google.com"); got != "" || throughGateway() != before {
		t.Errorf("www.google.com went through the egress gateway:\n%s", got)
	}
}
