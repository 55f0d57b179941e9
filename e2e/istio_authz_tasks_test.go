package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
)

// Istio's authorization tasks ("Authorization for HTTP traffic", "Authorization for TCP
// traffic", "Explicit deny") and the "Egress Gateways" task, run as a learner runs them:
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

// TestAuthorizationHTTPTask is "Authorization for HTTP traffic" on Bookinfo: allow-nothing
// in default makes productpage answer 403 "RBAC: access denied"; productpage-viewer (GET)
// brings the page back with "Error fetching product details!" and "Error fetching product
// reviews!"; details-viewer and reviews-viewer (principal bookinfo-productpage) bring
// details and reviews, with "Ratings service is currently unavailable"; ratings-viewer
// (principal bookinfo-reviews) brings the stars.
func TestAuthorizationHTTPTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, "testdata/kube-bookinfo.yaml")
	page := func() string {
		out, _ := execIn(t, l.name, nil, "deploy/curl", "curl", "-sS", "--max-time", "10", "http://productpage:9080/productpage")
		return out
	}
	within(t, "the whole page before any policy", page, func(p string) bool {
		return containsAll(p, "Book Details", "Book Reviews", "glyphicon-star")
	})

	applyYAML(t, l.name, `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: allow-nothing
  namespace: default
spec:
  {}
`)
	within(t, `"RBAC: access denied" (403)`, func() string {
		out, _ := execIn(t, l.name, nil, "deploy/curl", "curl", "-sS", "--max-time", "10", "-w", "\n%{http_code}", "http://productpage:9080/productpage")
		return out
	}, func(s string) bool { return containsAll(s, "RBAC: access denied", "\n403") })

	applyYAML(t, l.name, `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: "productpage-viewer"
  namespace: default
spec:
  selector:
    matchLabels:
      app: productpage
  action: ALLOW
  rules:
  - to:
    - operation:
        methods: ["GET"]
`)
	p := within(t, "the page with both errors", page, func(p string) bool {
		return containsAll(p, "<title>Simple Bookstore App</title>", "Error fetching product details!", "Error fetching product reviews!")
	})
	if containsAll(p, "Book Details") || containsAll(p, "Book Reviews") {
		t.Errorf("with only productpage-viewer the page shows details or reviews:\n%s", p)
	}
	// The policy allows GET only: another method is still denied.
	if out, _ := execIn(t, l.name, nil, "deploy/curl", "curl", "-sS", "--max-time", "10", "-X", "POST", "-o", "/dev/null", "-w", "%{http_code}", "http://productpage:9080/productpage"); out != "403" {
		t.Errorf("POST /productpage under productpage-viewer (GET only): %q, want 403", out)
	}

	applyYAML(t, l.name, `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: "details-viewer"
  namespace: default
spec:
  selector:
    matchLabels:
      app: details
  action: ALLOW
  rules:
  - from:
    - source:
        principals: ["cluster.local/ns/default/sa/bookinfo-productpage"]
    to:
    - operation:
        methods: ["GET"]
`)
	within(t, "details shown, reviews still failing", page, func(p string) bool {
		return containsAll(p, "Book Details", "ISBN-10", "Error fetching product reviews!")
	})
	// Only productpage's identity may read details: the curl pod (sa curl) may not.
	if out, _ := execIn(t, l.name, nil, "deploy/curl", "curl", "-sS", "--max-time", "10", "http://details:9080/details/0"); out != "RBAC: access denied" {
		t.Errorf("details from the curl pod (not bookinfo-productpage): %q, want RBAC: access denied", out)
	}

	applyYAML(t, l.name, `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: "reviews-viewer"
  namespace: default
spec:
  selector:
    matchLabels:
      app: reviews
  action: ALLOW
  rules:
  - from:
    - source:
        principals: ["cluster.local/ns/default/sa/bookinfo-productpage"]
    to:
    - operation:
        methods: ["GET"]
`)
	// reviews v1 calls no ratings; v2 and v3 show the ratings error.
	p = within(t, `reviews with "Ratings service is currently unavailable"`, page, func(p string) bool {
		return containsAll(p, "Book Details", "Book Reviews", "Ratings service is currently unavailable")
	})
	if strings.Contains(p, "glyphicon-star") {
		t.Errorf("stars before ratings-viewer:\n%s", p)
	}

	applyYAML(t, l.name, `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: "ratings-viewer"
  namespace: default
spec:
  selector:
    matchLabels:
      app: ratings
  action: ALLOW
  rules:
  - from:
    - source:
        principals: ["cluster.local/ns/default/sa/bookinfo-reviews"]
    to:
    - operation:
        methods: ["GET"]
`)
	within(t, "black or red stars", page, func(p string) bool {
		return containsAll(p, "Book Details", "Book Reviews", "glyphicon-star") && !strings.Contains(p, "unavailable")
	})
}

// tcpEcho is the TCP task's check, `sh -c 'echo "port N" | nc HOST N' | grep hello`: the
// curl image's nc is not on the host, so bash's /dev/tcp sends the line and reads one
// back. It returns what came back ("hello port N" when the connection succeeded).
func tcpEcho(t *testing.T, labName, host, port string) string {
	t.Helper()
	out, _ := execIn(t, labName, []string{"-n", "foo"}, "deploy/curl", "bash", "-c",
		`exec 3<>/dev/tcp/`+host+`/`+port+` && echo "port `+port+`" >&3 && timeout 5 head -n1 <&3`)
	return strings.TrimSpace(out)
}

// TestAuthorizationTCPTask is "Authorization for TCP traffic": tcp-echo answers on 9000,
// 9001 and (by pod IP) 9002; tcp-policy (ALLOW ports 9000, 9001) rejects 9002; adding
// the HTTP-only `methods: ["GET"]` to the ALLOW rule for 9000 rejects every port (the
// rule can match no TCP connection); a DENY rule with `methods: ["GET"]` on 9000 denies
// 9000 (the HTTP-only field is ignored, so the rule denies more) and leaves 9001 alone.
func TestAuthorizationTCPTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, "testdata/tasks/authz-foo.yaml")
	ip := podOf(t, l.name, "foo", "tcp-echo-").IP.String()
	type probe struct{ host, port string }
	ports := []probe{{"tcp-echo", "9000"}, {"tcp-echo", "9001"}, {ip, "9002"}}
	expect := func(step string, want map[string]bool) {
		t.Helper()
		for _, p := range ports {
			ok := want[p.port]
			within(t, step+": port "+p.port+map[bool]string{true: " connection succeeded", false: " connection rejected"}[ok],
				func() string { return tcpEcho(t, l.name, p.host, p.port) },
				func(s string) bool { return (s == "hello port "+p.port) == ok })
		}
	}
	expect("no policy", map[string]bool{"9000": true, "9001": true, "9002": true})

	applyYAML(t, l.name, `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: tcp-policy
  namespace: foo
spec:
  selector:
    matchLabels:
      app: tcp-echo
  action: ALLOW
  rules:
  - to:
    - operation:
        ports: ["9000", "9001"]
`)
	expect("tcp-policy (ALLOW 9000, 9001)", map[string]bool{"9000": true, "9001": true, "9002": false})

	applyYAML(t, l.name, `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: tcp-policy
  namespace: foo
spec:
  selector:
    matchLabels:
      app: tcp-echo
  action: ALLOW
  rules:
  - to:
    - operation:
        methods: ["GET"]
        ports: ["9000"]
`)
	expect("ALLOW with methods GET on 9000", map[string]bool{"9000": false, "9001": false, "9002": false})

	applyYAML(t, l.name, `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: tcp-policy
  namespace: foo
spec:
  selector:
    matchLabels:
      app: tcp-echo
  action: DENY
  rules:
  - to:
    - operation:
        methods: ["GET"]
        ports: ["9000"]
`)
	expect("DENY with methods GET on 9000", map[string]bool{"9000": false, "9001": true, "9002": true})
}

// TestExplicitDenyTask is "Explicit deny": deny-method-get makes GET 403 and leaves POST
// 200; with `notValues: ["admin"]` on x-token, GET with x-token: admin is 200 and guest
// 403; allow-path-ip then allows /ip for admin, while /get is 403 (no ALLOW matches) and
// /ip for guest is still 403 (DENY comes first).
func TestExplicitDenyTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, "testdata/tasks/authz-foo.yaml")
	code := func(method, path, token string) func() string {
		return func() string {
			args := []string{"curl", "http://httpbin.foo:8000" + path, "-X", method, "-sS", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}"}
			if token != "" {
				args = append(args, "-H", "x-token: "+token)
			}
			out, _ := execIn(t, l.name, []string{"-n", "foo"}, "deploy/curl", args...)
			return strings.TrimSpace(out)
		}
	}
	is := func(want string) func(string) bool { return func(s string) bool { return s == want } }
	within(t, "200 before any policy", code("GET", "/get", ""), is("200"))

	const denyGet = `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: deny-method-get
  namespace: foo
spec:
  selector:
    matchLabels:
      app: httpbin
  action: DENY
  rules:
  - to:
    - operation:
        methods: ["GET"]
`
	applyYAML(t, l.name, denyGet)
	within(t, "GET 403", code("GET", "/get", ""), is("403"))
	within(t, "POST 200", code("POST", "/post", ""), is("200"))

	applyYAML(t, l.name, denyGet+`    when:
    - key: request.headers[x-token]
      notValues: ["admin"]
`)
	within(t, "GET with x-token: admin 200", code("GET", "/get", "admin"), is("200"))
	within(t, "GET with x-token: guest 403", code("GET", "/get", "guest"), is("403"))

	applyYAML(t, l.name, `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: allow-path-ip
  namespace: foo
spec:
  selector:
    matchLabels:
      app: httpbin
  action: ALLOW
  rules:
  - to:
    - operation:
        paths: ["/ip"]
`)
	within(t, "GET /ip with x-token: guest 403 (denied first)", code("GET", "/ip", "guest"), is("403"))
	within(t, "GET /ip with x-token: admin 200", code("GET", "/ip", "admin"), is("200"))
	within(t, "GET /get with x-token: admin 403 (no ALLOW matches)", code("GET", "/get", "admin"), is("403"))
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
