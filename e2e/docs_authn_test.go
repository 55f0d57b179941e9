package e2e

import (
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
