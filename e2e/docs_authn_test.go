package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
)

// istio.io's authentication task pages (tasks/security/authentication/...) walked as
// their snips.sh write them, on pageLab (docs_security_test.go): the page's lines in
// bash, kubectl and istioctl changed to meshlab, outputs compared with the page's.
//
// The reader's own curl: the pages run it on the reader's machine, against the
// ingress gateway's address and against raw.githubusercontent.com (the JWT samples).
// Here the reader's shell has a curl function standing for that machine's curl: a
// request to raw.githubusercontent.com is made from a pod of the lab (fetchFrom, meshlab
// exec's arguments), whose outside world answers GitHub's paths under the world's CA (the
// host neither resolves nor trusts it, see jwtSample); any other request (the ingress
// gateway's address) is made from the lab's outside world, which reaches the gateway's
// LoadBalancer address as the Internet reaches a cluster's.

// readerCurl is the prelude defining the reader's curl for p's lab, fetching GitHub's
// files from the pod meshlab exec's fetchFrom names.
func (p *pageLab) readerCurl(fetchFrom string) string {
	return `curl() {
  case " $* " in
  *" https://raw.githubusercontent.com/"*) meshlab exec ` + fetchFrom + ` -- curl "$@" ;;
  *) ip netns exec ` + lab.WorldNamespace(p.name) + ` curl "$@" ;;
  esac
}
`
}

// token runs the page's `NAME=$(curl <github_file>/security/tools/jwt/samples/<file> -s)
// && echo "$NAME" | cut -d '.' -f2 - | base64 --decode -` with the reader's curl and
// returns what it printed (the payload, as base64 --decode prints it) and the token.
func (p *pageLab) token(reader, line string) (printed, token string) {
	p.t.Helper()
	name, _, ok := strings.Cut(line, "=$(")
	if !ok {
		p.t.Fatalf("%s: not a NAME=$(curl ...) line", line)
	}
	// The page's line, then the variable it set on a line of its own (the page uses it
	// in its next commands).
	out, _ := p.command(reader + line + "\necho\necho \"$" + name + "\"").CombinedOutput()
	s := strings.TrimRight(string(out), "\n")
	i := strings.LastIndexByte(s, '\n')
	if i < 0 || strings.Count(s[i+1:], ".") != 2 {
		p.t.Fatalf("%s\nprinted:\n%s\nwant a JWT in $%s", line, out, name)
	}
	return strings.TrimSuffix(s[:i], "\n"), s[i+1:]
}

// TestDocsClaimToHeaderTask walks "Copy JWT Claims to HTTP Headers"
// (tasks/security/authentication/claim-to-header): httpbin and sleep in foo (injection
// label), sleep's 200 to httpbin; the page's RequestAuthentication jwt-example with
// outputClaimToHeaders x-jwt-claim-foo <- foo; an invalid token 401; demo.jwt fetched
// and decoded as the page prints it, 200 with it, and the header httpbin saw, as the
// page greps it from /headers. Then the page's clean up.
//
// The page prints `"X-Jwt-Claim-Foo": "bar"`, kennethreitz httpbin's form; the sample's
// image today is go-httpbin, which lists each header's values, so the page's grep finds
// `"X-Jwt-Claim-Foo": [` with "bar" on the next line: the test compares go-httpbin's
// lines, as Istio with today's samples prints them.
func TestDocsClaimToHeaderTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	p := startPageLab(t)
	p.sh(`kubectl create ns foo
kubectl label namespace foo istio-injection=enabled
kubectl apply -f samples/httpbin/httpbin.yaml -n foo
kubectl apply -f samples/sleep/sleep.yaml -n foo`)
	const sleepPod = `"$(kubectl get pod -l app=sleep -n foo -o jsonpath={.items..metadata.name})" -c sleep -n foo`
	p.shows("200\n", `kubectl exec `+sleepPod+` -- curl http://httpbin.foo:8000/ip -sS -o /dev/null -w "%{http_code}\n"`)
	p.step("sleep reaches httpbin in foo")

	if out := p.sh(`kubectl apply -f - <<EOF
apiVersion: security.istio.io/v1beta1
kind: RequestAuthentication
metadata:
  name: "jwt-example"
  namespace: foo
spec:
  selector:
    matchLabels:
      app: httpbin
  jwtRules:
  - issuer: "testing@secure.istio.io"
    jwksUri: "https://raw.githubusercontent.com/istio/istio/master/security/tools/jwt/samples/jwks.json"
    outputClaimToHeaders:
    - header: "x-jwt-claim-foo"
      claim: "foo"
EOF`); out != "requestauthentication.security.istio.io/jwt-example created\n" {
		t.Errorf("apply jwt-example printed %q", out)
	}
	p.shows("401\n", `kubectl exec `+sleepPod+` -- curl "http://httpbin.foo:8000/headers" -sS -o /dev/null -H "Authorization: Bearer invalidToken" -w "%{http_code}\n"`)
	p.step("an invalid token: 401")

	reader := p.readerCurl(sleepPod)
	payload, token := p.token(reader, `TOKEN=$(curl https://raw.githubusercontent.com/istio/istio/master/security/tools/jwt/samples/demo.jwt -s) && echo "$TOKEN" | cut -d '.' -f2 - | base64 --decode -`)
	if want := `{"exp":4685989700,"foo":"bar","iat":1532389700,"iss":"testing@secure.istio.io","sub":"testing@secure.istio.io"}`; payload != want {
		t.Errorf("TOKEN=$(curl .../demo.jwt -s) && ... | base64 --decode - printed\n%s\nwant the page's\n%s", payload, want)
	}
	withToken := "TOKEN=" + token + "\n"
	p.shows("200\n", withToken+`kubectl exec `+sleepPod+` -- curl "http://httpbin.foo:8000/headers" -sS -o /dev/null -H "Authorization: Bearer $TOKEN" -w "%{http_code}\n"`)
	p.step("demo.jwt: 200")
	p.shows("\"X-Jwt-Claim-Foo\": [\n", withToken+`kubectl exec `+sleepPod+` -- curl "http://httpbin.foo:8000/headers" -sS -H "Authorization: Bearer $TOKEN" | grep "X-Jwt-Claim-Foo" | sed -e 's/^[ \t]*//'`)
	// The value on the line after, which the page's grep leaves out.
	p.shows("\"X-Jwt-Claim-Foo\": [\n\"bar\"\n", withToken+`kubectl exec `+sleepPod+` -- curl "http://httpbin.foo:8000/headers" -sS -H "Authorization: Bearer $TOKEN" | grep -A1 "X-Jwt-Claim-Foo" | sed -e 's/^[ \t]*//'`)
	// A client's own x-jwt-claim-foo does not reach httpbin: the filter removes it
	// (Envoy's jwt_authn sanitizes its claim headers); without a token httpbin sees none.
	p.shows("", `kubectl exec `+sleepPod+` -- curl "http://httpbin.foo:8000/headers" -sS -H "x-jwt-claim-foo: forged" | grep -i "X-Jwt-Claim-Foo"`)
	p.step("httpbin sees X-Jwt-Claim-Foo: bar")

	if out := p.sh(`kubectl delete namespace foo`); out != "namespace \"foo\" deleted\n" {
		t.Errorf("kubectl delete namespace foo printed %q", out)
	}
}

// showsElided runs the page's lines until what they print begins with the first line of
// want, the page's elided output, and holds its other lines in order ("..." any lines).
func (p *pageLab) showsElided(want, lines string) {
	p.t.Helper()
	first, _, _ := strings.Cut(want, "\n")
	p.until(lines+"\nprints the page's\n"+want, func() string {
		out, _ := p.command(lines).CombinedOutput()
		return string(out)
	}, func(out string) bool {
		return strings.HasPrefix(strings.TrimRight(strings.SplitN(strings.ReplaceAll(out, "\r", ""), "\n", 2)[0], " "), first) && elided(out, want)
	})
}

// ingressURL is the ingress-control page's INGRESS_HOST and INGRESS_PORT (the
// istio-ingressgateway Service's load balancer address and http2 port), which the
// pages set before their curls, as lines to prefix them with.
func (p *pageLab) ingressURL() string {
	p.t.Helper()
	env := p.sh(`export INGRESS_HOST=$(kubectl -n istio-system get service istio-ingressgateway -o jsonpath='{.status.loadBalancer.ingress[0].ip}')
export INGRESS_PORT=$(kubectl -n istio-system get service istio-ingressgateway -o jsonpath='{.spec.ports[?(@.name=="http2")].port}')
echo "INGRESS_HOST=$INGRESS_HOST INGRESS_PORT=$INGRESS_PORT"`)
	if !regexp.MustCompile(`^INGRESS_HOST=\d+\.\d+\.\d+\.\d+ INGRESS_PORT=80\n$`).MatchString(env) {
		p.t.Fatalf("%s: want the ingress gateway's EXTERNAL-IP and 80", env)
	}
	return env
}

// TestDocsJWTRouteTask walks "JWT claim based routing"
// (tasks/security/authentication/jwt-route): Istio installed (the installation guide's
// istioctl install), httpbin and httpbin-gateway.yaml through kube-inject in foo, the
// reader's 200 through the ingress gateway; RequestAuthentication ingress-jwt on the
// gateway and the VirtualService matching "@request.auth.claims.groups" exact group1;
// then the reader's curl -s -I: 404 without a token (no route), 401 with an invalid one,
// 200 with groups-scope.jwt (groups ["group1","group2"]), 404 with demo.jwt (no groups);
// the tokens fetched and decoded as the page prints them. Then the page's clean up.
func TestDocsJWTRouteTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	requireHostTool(t, "curl")
	p := startPageLab(t)
	p.sh(`istioctl install -y`)
	p.sh(`kubectl create ns foo
kubectl apply -f <(istioctl kube-inject -f samples/httpbin/httpbin.yaml) -n foo
kubectl apply -f <(istioctl kube-inject -f samples/httpbin/httpbin-gateway.yaml) -n foo`)
	reader := p.readerCurl("-n foo deploy/httpbin") + p.ingressURL()
	p.shows("200\n", reader+`curl "$INGRESS_HOST:$INGRESS_PORT"/headers -s -o /dev/null -w "%{http_code}\n"`)
	p.step("httpbin through the ingress gateway: 200")

	if out := p.sh(`kubectl apply -f - <<EOF
apiVersion: security.istio.io/v1beta1
kind: RequestAuthentication
metadata:
  name: ingress-jwt
  namespace: istio-system
spec:
  selector:
    matchLabels:
      istio: ingressgateway
  jwtRules:
  - issuer: "testing@secure.istio.io"
    jwksUri: "https://raw.githubusercontent.com/istio/istio/release-1.28/security/tools/jwt/samples/jwks.json"
EOF`); out != "requestauthentication.security.istio.io/ingress-jwt created\n" {
		t.Errorf("apply ingress-jwt printed %q", out)
	}
	if out := p.sh(`kubectl apply -f - <<EOF
apiVersion: networking.istio.io/v1alpha3
kind: VirtualService
metadata:
  name: httpbin
  namespace: foo
spec:
  hosts:
  - "*"
  gateways:
  - httpbin-gateway
  http:
  - match:
    - uri:
        prefix: /headers
      headers:
        "@request.auth.claims.groups":
          exact: group1
    route:
    - destination:
        port:
          number: 8000
        host: httpbin
EOF`); out != "virtualservice.networking.istio.io/httpbin configured\n" {
		t.Errorf("apply the VirtualService printed %q", out)
	}
	// Not the page's: istioctl analyze finds nothing to say of the lab (foo's
	// VirtualService names foo's httpbin, applied with -n foo; its "*" host is the
	// gateway's; the gateway's pods have ingress-jwt).
	if out := p.sh(`istioctl analyze`); strings.Contains(out, "[IST") || strings.Contains(out, "[ML") {
		t.Errorf("istioctl analyze:\n%s\nwant no findings", out)
	}
	p.showsElided("HTTP/1.1 404 Not Found\n...", reader+`curl -s -I "http://$INGRESS_HOST:$INGRESS_PORT/headers"`)
	p.showsElided("HTTP/1.1 401 Unauthorized\n...", reader+`curl -s -I "http://$INGRESS_HOST:$INGRESS_PORT/headers" -H "Authorization: Bearer some.invalid.token"`)
	p.step("no token: 404; an invalid one: 401")

	// The page prints exp 3537391104 and iat 1537391104, from an older groups-scope.jwt
	// than Istio's tree holds today (exp 4685989700, iat 1532389700): the claims match.
	payload, group := p.token(reader, `TOKEN_GROUP=$(curl https://raw.githubusercontent.com/istio/istio/release-1.28/security/tools/jwt/samples/groups-scope.jwt -s) && echo "$TOKEN_GROUP" | cut -d '.' -f2 - | base64 --decode -`)
	if want := `{"exp":4685989700,"groups":["group1","group2"],"iat":1532389700,"iss":"testing@secure.istio.io","scope":["scope1","scope2"],"sub":"testing@secure.istio.io"}`; !strings.HasPrefix(payload, want) {
		t.Errorf("TOKEN_GROUP=$(curl .../groups-scope.jwt -s) && ... | base64 --decode - printed\n%s\nwant the page's claims\n%s", payload, want)
	}
	p.showsElided("HTTP/1.1 200 OK\n...", reader+"TOKEN_GROUP="+group+"\n"+`curl -s -I "http://$INGRESS_HOST:$INGRESS_PORT/headers" -H "Authorization: Bearer $TOKEN_GROUP"`)
	p.step("groups-scope.jwt: 200")

	payload, noGroup := p.token(reader, `TOKEN_NO_GROUP=$(curl https://raw.githubusercontent.com/istio/istio/release-1.28/security/tools/jwt/samples/demo.jwt -s) && echo "$TOKEN_NO_GROUP" | cut -d '.' -f2 - | base64 --decode -`)
	if want := `{"exp":4685989700,"foo":"bar","iat":1532389700,"iss":"testing@secure.istio.io","sub":"testing@secure.istio.io"}`; payload != want {
		t.Errorf("TOKEN_NO_GROUP=$(curl .../demo.jwt -s) && ... | base64 --decode - printed\n%s\nwant the page's\n%s", payload, want)
	}
	p.showsElided("HTTP/1.1 404 Not Found\n...", reader+"TOKEN_NO_GROUP="+noGroup+"\n"+`curl -s -I "http://$INGRESS_HOST:$INGRESS_PORT/headers" -H "Authorization: Bearer $TOKEN_NO_GROUP"`)
	p.step("demo.jwt: 404")

	if out := p.sh(`kubectl delete namespace foo`); out != "namespace \"foo\" deleted\n" {
		t.Errorf("kubectl delete namespace foo printed %q", out)
	}
	if out := p.sh(`kubectl delete requestauthentication ingress-jwt -n istio-system`); out != "requestauthentication.security.istio.io \"ingress-jwt\" deleted\n" {
		t.Errorf("kubectl delete requestauthentication ingress-jwt -n istio-system printed %q", out)
	}
}

// authnLoop is the authn-policy page's loop: every sleep (foo and bar injected, legacy
// not) to every httpbin; setupLoop is its first form, with curl's -s twice.
const (
	authnLoop = `for from in "foo" "bar" "legacy"; do for to in "foo" "bar" "legacy"; do kubectl exec "$(kubectl get pod -l app=sleep -n ${from} -o jsonpath={.items..metadata.name})" -c sleep -n ${from} -- curl "http://httpbin.${to}:8000/ip" -s -o /dev/null -w "sleep.${from} to httpbin.${to}: %{http_code}\n"; done; done`
	setupLoop = `for from in "foo" "bar" "legacy"; do for to in "foo" "bar" "legacy"; do kubectl exec "$(kubectl get pod -l app=sleep -n ${from} -o jsonpath={.items..metadata.name})" -c sleep -n ${from} -- curl -s "http://httpbin.${to}:8000/ip" -s -o /dev/null -w "sleep.${from} to httpbin.${to}: %{http_code}\n"; done; done`
)

// authnLoopOut is the loop's output when legacy's sleep is refused by the httpbins
// named (000 and kubectl's exit code 56 line) and every other pair gets 200.
func authnLoopOut(refused ...string) string {
	var b strings.Builder
	for _, from := range []string{"foo", "bar", "legacy"} {
		for _, to := range []string{"foo", "bar", "legacy"} {
			if from == "legacy" && slices.Contains(refused, to) {
				b.WriteString("sleep.legacy to httpbin." + to + ": 000\ncommand terminated with exit code 56\n")
				continue
			}
			b.WriteString("sleep." + from + " to httpbin." + to + ": 200\n")
		}
	}
	return b.String()
}

// TestDocsAuthnPolicyTask walks "Authentication Policy"
// (tasks/security/authentication/authn-policy): istioctl install --set profile=default;
// httpbin and sleep through kube-inject in foo and bar, plain in legacy; the page's
// loops after each PeerAuthentication (none: all 200; STRICT mesh-wide: legacy refused
// by foo and bar; STRICT in foo; STRICT for bar's httpbin; its port-level exception;
// DISABLE for foo's httpbin over foo's STRICT), auto mTLS' X-Forwarded-Client-Cert (to
// httpbin.foo, none to httpbin.legacy); then end-user authentication at the ingress
// gateway: httpbin-gateway and its VirtualService, 200; RequestAuthentication jwt-example
// on the gateway: 200 without a token, 401 with deadbeef, 200 with demo.jwt; the DENY
// policy frontend-ingress for requests without a principal (403), then on /headers only
// (403 there, 200 on /ip); then the page's clean up.
//
// Where today's samples make the page print otherwise, the test holds what Istio does
// with them: go-httpbin lists each header's values (the XFCC line is `"X-Forwarded-
// Client-Cert": [`, its value on the next line), and listens on 8080 where the page's
// httpbin listened on 80, so the page's `portLevelMtls: 80: DISABLE` leaves httpbin's
// port STRICT (legacy to httpbin.bar stays 000; the page printed 200); the same
// exception on 8080 gives the page's 200.
//
// gen-jwt.py and key.pem are the outside world's (Istio's script; the private half of the
// world's sample key set, demoapp/jwtsamples.go), fetched by the reader's wget from the
// sleep pod in foo as readerCurl fetches.
func TestDocsAuthnPolicyTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	requireHostTool(t, "curl")
	requireHostTool(t, "wget")
	python := readerPython(t)
	// The page's wget writes gen-jwt.py and key.pem in its working directory: one of the
	// test's own, with samples/ linked to the module's (which stays unchanged).
	dir := t.TempDir()
	if err := os.Symlink(testutil.IstioSamples(t), filepath.Join(dir, "samples")); err != nil {
		t.Fatal(err)
	}
	p := &pageLab{docsLab: startDocsLab(t), samples: dir}
	// The page's install, without -y: the reader answers istioctl's y/N with y.
	install := p.command(`istioctl install --set profile=default`)
	install.Stdin = strings.NewReader("y\n")
	const defaultLines = "✔ Istio core installed ⛵️\n✔ Istiod installed 🧠\n✔ Ingress gateways installed 🛬\n✔ Installation complete\nMade this installation the default for injection and validation.\n"
	if out, err := install.CombinedOutput(); err != nil || !strings.HasSuffix(string(out), defaultLines) {
		t.Fatalf("istioctl install --set profile=default (answered y): %v\n%s\nwant istioctl's default profile lines", err, out)
	}
	p.sh(`kubectl create ns foo
kubectl apply -f <(istioctl kube-inject -f samples/httpbin/httpbin.yaml) -n foo
kubectl apply -f <(istioctl kube-inject -f samples/sleep/sleep.yaml) -n foo
kubectl create ns bar
kubectl apply -f <(istioctl kube-inject -f samples/httpbin/httpbin.yaml) -n bar
kubectl apply -f <(istioctl kube-inject -f samples/sleep/sleep.yaml) -n bar
kubectl create ns legacy
kubectl apply -f samples/httpbin/httpbin.yaml -n legacy
kubectl apply -f samples/sleep/sleep.yaml -n legacy`)
	p.shows("200\n", `kubectl exec "$(kubectl get pod -l app=sleep -n bar -o jsonpath={.items..metadata.name})" -c sleep -n bar -- curl http://httpbin.foo:8000/ip -s -o /dev/null -w "%{http_code}\n"`)
	p.shows(authnLoopOut(), setupLoop)
	p.shows("No resources found\n", `kubectl get peerauthentication --all-namespaces`)
	p.shows("", `kubectl get destinationrules.networking.istio.io --all-namespaces -o yaml | grep "host:"`)
	p.step("setup: every pair 200, no policies")

	// Auto mutual TLS: httpbin.foo sees the client's certificate in XFCC, httpbin.legacy
	// (no sidecar, plain text) none.
	const xfcc = `kubectl exec "$(kubectl get pod -l app=sleep -n foo -o jsonpath={.items..metadata.name})" -c sleep -n foo -- curl -s http://httpbin.foo:8000/headers -s | grep X-Forwarded-Client-Cert | sed 's/Hash=[a-z0-9]*;/Hash=<redacted>;/'`
	p.shows("    \"X-Forwarded-Client-Cert\": [\n", xfcc)
	p.shows("      \"By=spiffe://cluster.local/ns/foo/sa/httpbin;Hash=<redacted>;Subject=\\\"\\\";URI=spiffe://cluster.local/ns/foo/sa/sleep\"\n",
		strings.Replace(xfcc, "grep X-Forwarded-Client-Cert", "grep -A1 X-Forwarded-Client-Cert | tail -n1", 1))
	p.shows("", `kubectl exec "$(kubectl get pod -l app=sleep -n foo -o jsonpath={.items..metadata.name})" -c sleep -n foo -- curl http://httpbin.legacy:8000/headers -s | grep X-Forwarded-Client-Cert`)
	p.step("auto mTLS: XFCC at httpbin.foo, none at httpbin.legacy")

	if out := p.sh(`kubectl apply -f - <<EOF
apiVersion: security.istio.io/v1beta1
kind: PeerAuthentication
metadata:
  name: "default"
  namespace: "istio-system"
spec:
  mtls:
    mode: STRICT
EOF`); out != "peerauthentication.security.istio.io/default created\n" {
		t.Errorf("apply the mesh-wide PeerAuthentication printed %q", out)
	}
	p.shows(authnLoopOut("foo", "bar"), authnLoop)
	p.step("STRICT mesh-wide: legacy refused by foo and bar")
	if out := p.sh(`kubectl delete peerauthentication -n istio-system default`); out != "peerauthentication.security.istio.io \"default\" deleted\n" {
		t.Errorf("cleanup part 1 printed %q", out)
	}

	p.sh(`kubectl apply -f - <<EOF
apiVersion: security.istio.io/v1beta1
kind: PeerAuthentication
metadata:
  name: "default"
  namespace: "foo"
spec:
  mtls:
    mode: STRICT
EOF`)
	p.shows(authnLoopOut("foo"), authnLoop)
	p.step("STRICT in foo: legacy refused by foo")

	const workloadPA = `cat <<EOF | kubectl apply -n bar -f -
apiVersion: security.istio.io/v1beta1
kind: PeerAuthentication
metadata:
  name: "httpbin"
  namespace: "bar"
spec:
  selector:
    matchLabels:
      app: httpbin
  mtls:
    mode: STRICT
`
	if out := p.sh(workloadPA + "EOF"); out != "peerauthentication.security.istio.io/httpbin created\n" {
		t.Errorf("apply bar's httpbin PeerAuthentication printed %q", out)
	}
	p.shows(authnLoopOut("foo", "bar"), authnLoop)
	p.step("STRICT for bar's httpbin: legacy refused by foo and bar")

	if out := p.sh(workloadPA + "  portLevelMtls:\n    80:\n      mode: DISABLE\nEOF"); out != "peerauthentication.security.istio.io/httpbin configured\n" {
		t.Errorf("apply the port-level exception printed %q", out)
	}
	// httpbin listens on 8080: an exception for port 80 leaves it STRICT (see above).
	p.shows(authnLoopOut("foo", "bar"), authnLoop)
	p.sh(workloadPA + "  portLevelMtls:\n    8080:\n      mode: DISABLE\nEOF")
	p.shows(authnLoopOut("foo"), authnLoop)
	p.step("port-level DISABLE: 80 changes nothing, 8080 lets legacy in")

	if out := p.sh(`cat <<EOF | kubectl apply -n foo -f -
apiVersion: security.istio.io/v1beta1
kind: PeerAuthentication
metadata:
  name: "overwrite-example"
  namespace: "foo"
spec:
  selector:
    matchLabels:
      app: httpbin
  mtls:
    mode: DISABLE
EOF`); out != "peerauthentication.security.istio.io/overwrite-example created\n" {
		t.Errorf("apply overwrite-example printed %q", out)
	}
	p.shows("200\n", `kubectl exec "$(kubectl get pod -l app=sleep -n legacy -o jsonpath={.items..metadata.name})" -c sleep -n legacy -- curl http://httpbin.foo:8000/ip -s -o /dev/null -w "%{http_code}\n"`)
	p.step("policy precedence: foo's httpbin DISABLE over foo's STRICT")
	if out := p.sh(`kubectl delete peerauthentication default overwrite-example -n foo
kubectl delete peerauthentication httpbin -n bar`); out != `peerauthentication.security.istio.io "default" deleted
peerauthentication.security.istio.io "overwrite-example" deleted
peerauthentication.security.istio.io "httpbin" deleted
` {
		t.Errorf("cleanup part 2 printed %q", out)
	}

	// End-user authentication at the ingress gateway.
	p.sh(`kubectl apply -f - <<EOF
apiVersion: networking.istio.io/v1alpha3
kind: Gateway
metadata:
  name: httpbin-gateway
  namespace: foo
spec:
  selector:
    istio: ingressgateway # use Istio default gateway implementation
  servers:
  - port:
      number: 80
      name: http
      protocol: HTTP
    hosts:
    - "*"
EOF`)
	p.sh(`kubectl apply -f - <<EOF
apiVersion: networking.istio.io/v1alpha3
kind: VirtualService
metadata:
  name: httpbin
  namespace: foo
spec:
  hosts:
  - "*"
  gateways:
  - httpbin-gateway
  http:
  - route:
    - destination:
        port:
          number: 8000
        host: httpbin.foo.svc.cluster.local
EOF`)
	reader := p.readerCurl(`"$(kubectl get pod -l app=sleep -n foo -o jsonpath={.items..metadata.name})" -c sleep -n foo`) + p.ingressURL()
	headers := `curl "$INGRESS_HOST:$INGRESS_PORT/headers" -s -o /dev/null -w "%{http_code}\n"`
	p.shows("200\n", reader+headers)
	p.step("httpbin.foo through the ingress gateway: 200")

	if out := p.sh(`kubectl apply -f - <<EOF
apiVersion: security.istio.io/v1beta1
kind: RequestAuthentication
metadata:
  name: "jwt-example"
  namespace: istio-system
spec:
  selector:
    matchLabels:
      istio: ingressgateway
  jwtRules:
  - issuer: "testing@secure.istio.io"
    jwksUri: "https://raw.githubusercontent.com/istio/istio/master/security/tools/jwt/samples/jwks.json"
EOF`); out != "requestauthentication.security.istio.io/jwt-example created\n" {
		t.Errorf("apply jwt-example printed %q", out)
	}
	p.shows("401\n", reader+`curl --header "Authorization: Bearer deadbeef" "$INGRESS_HOST:$INGRESS_PORT/headers" -s -o /dev/null -w "%{http_code}\n"`)
	p.shows("200\n", reader+headers)
	p.shows("200\n", reader+`TOKEN=$(curl https://raw.githubusercontent.com/istio/istio/master/security/tools/jwt/samples/demo.jwt -s)
curl --header "Authorization: Bearer $TOKEN" "$INGRESS_HOST:$INGRESS_PORT/headers" -s -o /dev/null -w "%{http_code}\n"`)
	p.step("jwt-example at the gateway: none 200, deadbeef 401, demo.jwt 200")

	// gen-jwt.py and key.pem fetched with the reader's wget, a token expiring in 5 s:
	// 200 while the JWT filter's 60 s clock skew lasts, then 401 (the loop sleeps 10 s
	// between requests: 100 s). The page prints the loop's codes; jwcrypto's warnings on
	// stderr are logged, not compared.
	reader += p.readerWget(`"$(kubectl get pod -l app=sleep -n foo -o jsonpath={.items..metadata.name})" -c sleep -n foo`) + python
	p.sh(reader + `wget --no-verbose https://raw.githubusercontent.com/istio/istio/master/security/tools/jwt/samples/gen-jwt.py
wget --no-verbose https://raw.githubusercontent.com/istio/istio/master/security/tools/jwt/samples/key.pem`)
	cmd := p.command(reader + `TOKEN=$(python3 ./gen-jwt.py ./key.pem --expire 5)
for i in $(seq 1 10); do curl --header "Authorization: Bearer $TOKEN" "$INGRESS_HOST:$INGRESS_PORT/headers" -s -o /dev/null -w "%{http_code}\n"; sleep 10; done`)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if out, err := cmd.Output(); err != nil || string(out) != "200\n200\n200\n200\n200\n200\n200\n401\n401\n401\n" {
		t.Errorf("the page's gen-jwt.py --expire 5 loop printed (%v):\n%s%s\nwant the page's seven 200 and three 401", err, out, stderr.String())
	} else if stderr.Len() > 0 {
		t.Logf("the loop's stderr:\n%s", stderr.String())
	}
	p.step("gen-jwt.py --expire 5: 200 for the clock skew's 60 s, then 401")

	const frontend = `kubectl apply -f - <<EOF
apiVersion: security.istio.io/v1beta1
kind: AuthorizationPolicy
metadata:
  name: "frontend-ingress"
  namespace: istio-system
spec:
  selector:
    matchLabels:
      istio: ingressgateway
  action: DENY
  rules:
  - from:
    - source:
        notRequestPrincipals: ["*"]
`
	if out := p.sh(frontend + "EOF"); out != "authorizationpolicy.security.istio.io/frontend-ingress created\n" {
		t.Errorf("apply frontend-ingress printed %q", out)
	}
	p.shows("403\n", reader+headers)
	p.step("frontend-ingress: no token 403")
	p.sh(frontend + "    to:\n    - operation:\n        paths: [\"/headers\"]\nEOF")
	p.shows("403\n", reader+headers)
	p.shows("200\n", reader+`curl "$INGRESS_HOST:$INGRESS_PORT/ip" -s -o /dev/null -w "%{http_code}\n"`)
	p.step("frontend-ingress on /headers: 403 there, 200 on /ip")

	if out := p.sh(`kubectl -n istio-system delete requestauthentication jwt-example
kubectl -n istio-system delete authorizationpolicy frontend-ingress
kubectl delete ns foo bar legacy`); out != `requestauthentication.security.istio.io "jwt-example" deleted
authorizationpolicy.security.istio.io "frontend-ingress" deleted
namespace "foo" deleted
namespace "bar" deleted
namespace "legacy" deleted
` {
		t.Errorf("cleanup part 3 printed %q", out)
	}
	p.sh(`rm -f ./gen-jwt.py ./key.pem`)
}

// readerWget is the prelude defining the reader's wget: a file of raw.githubusercontent.com
// fetched from the pod meshlab exec's fetchFrom names (as readerCurl does), written in
// the working directory under its name, as wget writes it.
func (p *pageLab) readerWget(fetchFrom string) string {
	return `wget() {
  local url="${*: -1}"
  meshlab exec ` + fetchFrom + ` -- wget "$@" -O - > "${url##*/}"
}
`
}

// readerPython is the prelude giving the reader's shell a python3 with jwcrypto, which the
// page asks the reader to install for gen-jwt.py: the one on PATH when it has it, else
// Debian's (python3-jwcrypto, make deps). Without one the test fails in CI and skips
// elsewhere.
func readerPython(t *testing.T) string {
	t.Helper()
	if exec.Command("python3", "-c", "import jwcrypto").Run() == nil {
		return ""
	}
	if exec.Command("/usr/bin/python3", "-c", "import jwcrypto").Run() == nil {
		return "python3() { /usr/bin/python3 \"$@\"; }\n"
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no python3 with jwcrypto (Debian's python3-jwcrypto); the page's gen-jwt.py needs it")
	}
	t.Skip("no python3 with jwcrypto (Debian's python3-jwcrypto); the page's gen-jwt.py needs it")
	return ""
}
