package e2e

import (
	"bufio"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// istio.io's security task pages walked as they write them: each page's shell lines run
// by bash in the directory that holds Istio's samples/ (the module's, unchanged), with
// kubectl and istioctl changed to meshlab and nothing else, and what they print compared
// with what the page prints (its snips.sh `_out`, stdout and stderr as a terminal shows
// them). A page's check is run again until it prints the page's output, as the pages say
// ("retry in a few more seconds": policies reach the proxies after apply returns).

// pageLab is a docs lab whose page lines run in bash.
type pageLab struct {
	*docsLab
	samples string // the directory holding samples/, the pages' working directory
}

func startPageLab(t *testing.T) *pageLab {
	t.Helper()
	return &pageLab{docsLab: startDocsLab(t), samples: filepath.Dir(testutil.IstioSamples(t))}
}

// pageTools matches the page's command names, which are all the page changes.
var pageTools = regexp.MustCompile(`\b(kubectl|istioctl)\b`)

// command returns bash running the page's lines, kubectl and istioctl changed to meshlab
// (a function running this lab's meshlab).
func (p *pageLab) command(lines string) *exec.Cmd {
	prelude := "meshlab() { '" + meshlabBin(p.t) + "' --lab " + p.name + ` "$@"; }` + "\n"
	cmd := exec.Command("bash", "-c", prelude+pageTools.ReplaceAllString(lines, "meshlab"))
	cmd.Dir = p.samples
	return cmd
}

// sh runs the page's lines and returns what they print (stdout and stderr, as the page
// shows a terminal's), failing the test when bash fails.
func (p *pageLab) sh(lines string) string {
	p.t.Helper()
	out, err := p.command(lines).CombinedOutput()
	if err != nil {
		p.t.Fatalf("%s\n%v\n%s", lines, err, out)
	}
	return string(out)
}

// shows runs the page's lines until they print want, the page's output, exactly (for at
// most 30 s: a loaded machine is slow to bring pods up and push config).
func (p *pageLab) shows(want, lines string) {
	p.t.Helper()
	p.until(lines+"\nprints the page's\n"+want, func() string {
		out, _ := p.command(lines).CombinedOutput()
		return string(out)
	}, func(out string) bool { return out == want })
}

// sleepExec is the security pages' `kubectl exec "$(kubectl get pod -l app=sleep -n NS
// -o jsonpath={.items..metadata.name})" -c sleep -n NS --`, to which a page adds its
// command.
func sleepExec(ns string) string {
	return `kubectl exec "$(kubectl get pod -l app=sleep -n ` + ns + ` -o jsonpath={.items..metadata.name})" -c sleep -n ` + ns + ` --`
}

// TestAuthorizationHTTPTask walks "Authorization for HTTP traffic"
// (tasks/security/authorization/authz-http) on Bookinfo as its "Before you begin" sets
// it up (istioctl install, the Bookinfo page's injection label, bookinfo.yaml,
// bookinfo-gateway.yaml and GATEWAY_URL from the ingress gateway's Service), the
// browser's visits to http://$GATEWAY_URL/productpage made by curl from outside the
// cluster: allow-nothing gives 403 "RBAC: access denied"; productpage-viewer the page
// with "Error fetching product details" and "Error fetching product reviews"; details-
// and reviews-viewer bring both, reviews v2/v3 saying "Ratings service is currently
// unavailable"; ratings-viewer the stars. Then the page's clean up.
func TestAuthorizationHTTPTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	requireHostTool(t, "curl")
	p := startPageLab(t)
	p.sh(`istioctl install -y
kubectl label namespace default istio-injection=enabled
kubectl apply -f samples/bookinfo/platform/kube/bookinfo.yaml
kubectl apply -f samples/bookinfo/networking/bookinfo-gateway.yaml`)
	url := strings.TrimSpace(p.sh(`export INGRESS_HOST=$(kubectl -n istio-system get service istio-ingressgateway -o jsonpath='{.status.loadBalancer.ingress[0].ip}')
export INGRESS_PORT=$(kubectl -n istio-system get service istio-ingressgateway -o jsonpath='{.spec.ports[?(@.name=="http2")].port}')
export GATEWAY_URL=$INGRESS_HOST:$INGRESS_PORT
echo "$GATEWAY_URL"`))
	if !regexp.MustCompile(`^\d+\.\d+\.\d+\.\d+:80$`).MatchString(url) {
		t.Fatalf("GATEWAY_URL=%q, want the ingress gateway's EXTERNAL-IP:80", url)
	}
	p.step("Bookinfo and its gateway applied, GATEWAY_URL=" + url)
	// The browser: the product page from outside the cluster, its body and status.
	browse := func() string {
		out, _ := p.outside("curl", "-s", "-w", "\n%{http_code}", "http://"+url+"/productpage")
		return out
	}
	page := func(what, code string, words ...string) string {
		t.Helper()
		return p.until(what, browse, func(out string) bool {
			if !strings.HasSuffix(out, "\n"+code) {
				return false
			}
			for _, w := range words {
				if !strings.Contains(out, w) {
					return false
				}
			}
			return true
		})
	}
	page("the product page with Book Details and Book Reviews", "200", "Book Details", "Book Reviews")

	if out := p.sh(`kubectl apply -f - <<EOF
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: allow-nothing
  namespace: default
spec:
  {}
EOF`); out != "authorizationpolicy.security.istio.io/allow-nothing created\n" {
		t.Errorf("apply allow-nothing: %q", out)
	}
	page(`"RBAC: access denied"`, "403", "RBAC: access denied")
	p.step("allow-nothing: RBAC: access denied")

	if out := p.sh(`kubectl apply -f - <<EOF
apiVersion: security.istio.io/v1
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
EOF`); out != "authorizationpolicy.security.istio.io/productpage-viewer created\n" {
		t.Errorf("apply productpage-viewer: %q", out)
	}
	body := page("the page with both errors", "200", "<title>Simple Bookstore App</title>", "Error fetching product details", "Error fetching product reviews")
	if strings.Contains(body, "Book Details") || strings.Contains(body, "Book Reviews") {
		t.Errorf("with only productpage-viewer the page shows details or reviews:\n%s", body)
	}
	p.step("productpage-viewer: both errors")

	p.sh(`kubectl apply -f - <<EOF
apiVersion: security.istio.io/v1
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
EOF`)
	p.sh(`kubectl apply -f - <<EOF
apiVersion: security.istio.io/v1
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
EOF`)
	// Reviews v1 calls no ratings: the page's error is v2's or v3's, so a visit of
	// theirs is waited for, as a reader refreshes the page.
	body = page(`"Book Details", "Book Reviews" and "Ratings service is currently unavailable"`, "200",
		"Book Details", "Book Reviews", "Ratings service is currently unavailable")
	if strings.Contains(body, "glyphicon-star") {
		t.Errorf("stars before ratings-viewer:\n%s", body)
	}
	p.step("details-viewer, reviews-viewer: ratings unavailable")

	p.sh(`kubectl apply -f - <<EOF
apiVersion: security.istio.io/v1
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
EOF`)
	page("the black or red stars", "200", "Book Details", "Book Reviews", "glyphicon glyphicon-star")
	p.step("ratings-viewer: stars")

	if out := p.sh(`kubectl delete authorizationpolicy.security.istio.io/allow-nothing
kubectl delete authorizationpolicy.security.istio.io/productpage-viewer
kubectl delete authorizationpolicy.security.istio.io/details-viewer
kubectl delete authorizationpolicy.security.istio.io/reviews-viewer
kubectl delete authorizationpolicy.security.istio.io/ratings-viewer
kubectl delete authorizationpolicy.security.istio.io/bookinfo-gateway-viewer --ignore-not-found`); out != `authorizationpolicy.security.istio.io "allow-nothing" deleted
authorizationpolicy.security.istio.io "productpage-viewer" deleted
authorizationpolicy.security.istio.io "details-viewer" deleted
authorizationpolicy.security.istio.io "reviews-viewer" deleted
authorizationpolicy.security.istio.io "ratings-viewer" deleted
` {
		t.Errorf("the page's clean up printed:\n%s", out)
	}
}

// TestAuthorizationTCPTask walks "Authorization for TCP traffic"
// (tasks/security/authorization/authz-tcp): tcp-echo and sleep injected into foo with
// `kube-inject`, the page's `sh -c 'echo "port N" | nc HOST N' | grep "hello" && echo
// 'connection succeeded' || echo 'connection rejected'` on 9000, 9001 and (the pod IP)
// 9002, each printing the page's lines after each of its policies: ALLOW 9000 and 9001;
// ALLOW with the HTTP-only methods on 9000 (no TCP connection matches); DENY with
// methods (denies every port); DENY with methods on 9000 (only 9000). Then the page's
// clean up.
func TestAuthorizationTCPTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	p := startPageLab(t)
	p.sh(`kubectl create ns foo
kubectl apply -f <(istioctl kube-inject -f samples/tcp-echo/tcp-echo.yaml) -n foo
kubectl apply -f <(istioctl kube-inject -f samples/sleep/sleep.yaml) -n foo`)
	nc := func(port, host string) string {
		return sleepExec("foo") + ` sh -c \
    'echo "port ` + port + `" | nc ` + host + ` ` + port + `' | grep "hello" && echo 'connection succeeded' || echo 'connection rejected'`
	}
	const ip = `TCP_ECHO_IP=$(kubectl get pod "$(kubectl get pod -l app=tcp-echo -n foo -o jsonpath={.items..metadata.name})" -n foo -o jsonpath="{.status.podIP}")
`
	succeeded := func(port string) string { return "hello port " + port + "\nconnection succeeded\n" }
	const rejected = "connection rejected\n"
	expect := func(step, p9000, p9001, p9002 string) {
		t.Helper()
		p.shows(p9000, nc("9000", "tcp-echo"))
		p.shows(p9001, nc("9001", "tcp-echo"))
		p.shows(p9002, ip+sleepExec("foo")+` sh -c \
    "echo \"port 9002\" | nc $TCP_ECHO_IP 9002" | grep "hello" && echo 'connection succeeded' || echo 'connection rejected'`)
		p.step(step)
	}
	expect("before any policy", succeeded("9000"), succeeded("9001"), succeeded("9002"))

	policy := func(action, operation string) {
		t.Helper()
		p.sh(`kubectl apply -f - <<EOF
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: tcp-policy
  namespace: foo
spec:
  selector:
    matchLabels:
      app: tcp-echo
  action: ` + action + `
  rules:
  - to:
    - operation:
` + operation + `EOF`)
	}
	policy("ALLOW", "        ports: [\"9000\", \"9001\"]\n")
	expect("ALLOW ports 9000, 9001", succeeded("9000"), succeeded("9001"), rejected)
	policy("ALLOW", "        methods: [\"GET\"]\n        ports: [\"9000\"]\n")
	expect("ALLOW methods GET on 9000", rejected, rejected, rejected)
	policy("DENY", "        methods: [\"GET\"]\n")
	expect("DENY methods GET", rejected, rejected, rejected)
	policy("DENY", "        methods: [\"GET\"]\n        ports: [\"9000\"]\n")
	expect("DENY methods GET on 9000", rejected, succeeded("9001"), succeeded("9002"))

	if out := p.sh(`kubectl delete namespace foo`); out != "namespace \"foo\" deleted\n" {
		t.Errorf("kubectl delete namespace foo: %q", out)
	}
}

// TestExplicitDenyTask walks "Explicit deny" (tasks/security/authorization/authz-deny):
// httpbin and sleep injected into foo, then the page's curl lines printing the status
// code, each after its policy: deny-method-get (GET 403, POST 200), the same with
// `notValues: ["admin"]` on x-token (admin 200, guest 403), allow-path-ip (/ip for guest
// 403, for admin 200, /get for admin 403). Then the page's clean up.
func TestExplicitDenyTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	p := startPageLab(t)
	p.sh(`kubectl create ns foo
kubectl apply -f <(istioctl kube-inject -f samples/httpbin/httpbin.yaml) -n foo
kubectl apply -f <(istioctl kube-inject -f samples/sleep/sleep.yaml) -n foo`)
	p.shows("200\n", sleepExec("foo")+` curl http://httpbin.foo:8000/ip -sS -o /dev/null -w "%{http_code}\n"`)
	p.step("sleep reaches httpbin")

	const denyGet = `kubectl apply -f - <<EOF
apiVersion: security.istio.io/v1
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
	p.sh(denyGet + "EOF")
	p.shows("403\n", sleepExec("foo")+` curl "http://httpbin.foo:8000/get" -X GET -sS -o /dev/null -w "%{http_code}\n"`)
	p.shows("200\n", sleepExec("foo")+` curl "http://httpbin.foo:8000/post" -X POST -sS -o /dev/null -w "%{http_code}\n"`)
	p.step("deny-method-get")

	p.sh(denyGet + `    when:
    - key: request.headers[x-token]
      notValues: ["admin"]
EOF`)
	p.shows("200\n", sleepExec("foo")+` curl "http://httpbin.foo:8000/get" -X GET -H "x-token: admin" -sS -o /dev/null -w "%{http_code}\n"`)
	p.shows("403\n", sleepExec("foo")+` curl "http://httpbin.foo:8000/get" -X GET -H "x-token: guest" -sS -o /dev/null -w "%{http_code}\n"`)
	p.step("deny-method-get unless x-token: admin")

	p.sh(`kubectl apply -f - <<EOF
apiVersion: security.istio.io/v1
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
EOF`)
	p.shows("403\n", sleepExec("foo")+` curl "http://httpbin.foo:8000/ip" -X GET -H "x-token: guest" -s -o /dev/null -w "%{http_code}\n"`)
	p.shows("200\n", sleepExec("foo")+` curl "http://httpbin.foo:8000/ip" -X GET -H "x-token: admin" -s -o /dev/null -w "%{http_code}\n"`)
	p.shows("403\n", sleepExec("foo")+` curl "http://httpbin.foo:8000/get" -X GET -H "x-token: admin" -s -o /dev/null -w "%{http_code}\n"`)
	p.step("allow-path-ip")

	if out := p.sh(`kubectl delete namespace foo`); out != "namespace \"foo\" deleted\n" {
		t.Errorf("kubectl delete namespace foo: %q", out)
	}
}

// mtlsLoop is mtls-migration's loop: every sleep (foo and bar injected, legacy not) to
// httpbin in foo and bar.
const mtlsLoop = `for from in "foo" "bar" "legacy"; do for to in "foo" "bar"; do kubectl exec "$(kubectl get pod -l app=sleep -n ${from} -o jsonpath={.items..metadata.name})" -c sleep -n ${from} -- curl http://httpbin.${to}:8000/ip -s -o /dev/null -w "sleep.${from} to httpbin.${to}: %{http_code}\n"; done; done`

// TestMutualTLSMigrationTask walks "Mutual TLS Migration"
// (tasks/security/authentication/mtls-migration): httpbin and sleep injected into foo
// and bar, sleep without a sidecar in legacy; the page's loop prints 200 for every pair,
// `get peerauthentication|destinationrule --all-namespaces` "No resources found"; with
// STRICT in foo the loop prints legacy's 000 and kubectl's "command terminated with exit
// code 56" for foo; the page's `sudo tcpdump` in httpbin's istio-proxy listens on eth0;
// with STRICT mesh-wide legacy reaches neither; then the page's clean up.
func TestMutualTLSMigrationTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	requireHostTool(t, "tcpdump")
	p := startPageLab(t)
	p.sh(`kubectl create ns foo
kubectl apply -f <(istioctl kube-inject -f samples/httpbin/httpbin.yaml) -n foo
kubectl apply -f <(istioctl kube-inject -f samples/sleep/sleep.yaml) -n foo
kubectl create ns bar
kubectl apply -f <(istioctl kube-inject -f samples/httpbin/httpbin.yaml) -n bar
kubectl apply -f <(istioctl kube-inject -f samples/sleep/sleep.yaml) -n bar`)
	p.sh(`kubectl create ns legacy
kubectl apply -f samples/sleep/sleep.yaml -n legacy`)
	p.shows(`sleep.foo to httpbin.foo: 200
sleep.foo to httpbin.bar: 200
sleep.bar to httpbin.foo: 200
sleep.bar to httpbin.bar: 200
sleep.legacy to httpbin.foo: 200
sleep.legacy to httpbin.bar: 200
`, mtlsLoop)
	p.shows("No resources found\n", `kubectl get peerauthentication --all-namespaces`)
	p.shows("No resources found\n", `kubectl get destinationrule --all-namespaces`)
	p.step("every client reaches both httpbins")

	p.sh(`kubectl apply -n foo -f - <<EOF
apiVersion: security.istio.io/v1beta1
kind: PeerAuthentication
metadata:
  name: default
spec:
  mtls:
    mode: STRICT
EOF`)
	p.shows(`sleep.foo to httpbin.foo: 200
sleep.foo to httpbin.bar: 200
sleep.bar to httpbin.foo: 200
sleep.bar to httpbin.bar: 200
sleep.legacy to httpbin.foo: 000
command terminated with exit code 56
sleep.legacy to httpbin.bar: 200
`, mtlsLoop)
	p.step("STRICT in foo: legacy refused by httpbin.foo")
	p.tcpdump()

	p.sh(`kubectl apply -n istio-system -f - <<EOF
apiVersion: security.istio.io/v1beta1
kind: PeerAuthentication
metadata:
  name: default
spec:
  mtls:
    mode: STRICT
EOF`)
	p.shows(`sleep.foo to httpbin.foo: 200
sleep.foo to httpbin.bar: 200
sleep.bar to httpbin.foo: 200
sleep.bar to httpbin.bar: 200
sleep.legacy to httpbin.foo: 000
command terminated with exit code 56
sleep.legacy to httpbin.bar: 000
command terminated with exit code 56
`, mtlsLoop)
	p.step("STRICT mesh-wide: legacy refused by both")

	if out := p.sh(`kubectl delete peerauthentication -n foo default
kubectl delete peerauthentication -n istio-system default`); out != "peerauthentication.security.istio.io \"default\" deleted\npeerauthentication.security.istio.io \"default\" deleted\n" {
		t.Errorf("the page's clean up of its PeerAuthentications printed %q", out)
	}
	// The page prints "Namespaces foo bar legacy deleted."; kubectl prints a line per
	// namespace.
	if out := p.sh(`kubectl delete ns foo bar legacy`); out != "namespace \"foo\" deleted\nnamespace \"bar\" deleted\nnamespace \"legacy\" deleted\n" {
		t.Errorf("kubectl delete ns foo bar legacy: %q", out)
	}
}

// tcpdump runs the page's `kubectl exec -nfoo "$(...)" -c istio-proxy -- sudo tcpdump dst
// port 80 -A` until it prints the page's two lines, then stops it as the reader does
// (Ctrl-C). The page's tcpdump (the proxy image's, older) says "use -v or -vv" and
// "capture size"; Debian's 4.99 says "use -v[v]..." and "snapshot length": the interface
// and link type are compared.
func (p *pageLab) tcpdump() {
	p.t.Helper()
	cmd := p.command(`kubectl exec -nfoo "$(kubectl get pod -nfoo -lapp=httpbin -ojsonpath={.items..metadata.name})" -c istio-proxy -- sudo tcpdump dst port 80  -A`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Ctrl-C reaches the whole pipeline
	out, err := cmd.StdoutPipe()
	if err != nil {
		p.t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var got []string
	timeout := time.After(30 * time.Second)
	for len(got) < 2 {
		select {
		case l, ok := <-lines:
			if !ok {
				p.t.Fatalf("sudo tcpdump in istio-proxy ended (%v) after:\n%s", <-exited, strings.Join(got, "\n"))
			}
			got = append(got, l)
		case <-timeout:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			p.t.Fatalf("sudo tcpdump in istio-proxy: after 30 s:\n%s", strings.Join(got, "\n"))
		}
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			p.t.Errorf("sudo tcpdump: %v", err)
		}
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		p.t.Errorf("sudo tcpdump did not stop on Ctrl-C")
	}
	if !strings.HasPrefix(got[0], "tcpdump: verbose output suppressed, use -v") ||
		!strings.HasPrefix(got[1], "listening on eth0, link-type EN10MB (Ethernet), ") {
		p.t.Errorf("sudo tcpdump in istio-proxy printed:\n%s\nwant the page's\ntcpdump: verbose output suppressed, use -v or -vv for full protocol decode\nlistening on eth0, link-type EN10MB (Ethernet), capture size 262144 bytes", strings.Join(got, "\n"))
	}
	p.step("sudo tcpdump in istio-proxy listening on eth0")
}
