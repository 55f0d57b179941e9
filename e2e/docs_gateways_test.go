package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
)

// The gateway task pages of istio.io walked as they write them, on Istio's sample files,
// each kubectl/istioctl command changed only to meshlab. The reader's own commands
// (curl, openssl) run as the page writes them; the ones the page runs on the reader's
// machine, outside the cluster, run in the lab's outside world (ml-<lab>-world), which
// reaches a gateway's LoadBalancer address as the Internet reaches a cluster's load
// balancer. Outputs are compared with the page's where it prints them: its lines in
// order, "..." standing for any lines (istio.io's own _verify_elided).

// docsLab is a task lab with the page's command forms: stdout alone (what the page
// prints), stdin for `kubectl apply -f - <<EOF`, and the reader's commands outside.
type docsLab struct {
	*taskLab
	t *testing.T
}

func startDocsLab(t *testing.T) *docsLab {
	t.Helper()
	return &docsLab{taskLab: startTaskLabFrom(t, "# a cluster before the task\n"), t: t}
}

// kubectl runs a meshlab command with stdin (or none) and returns its stdout, failing
// the test when it fails; its stderr (meshlab's notes on the pods it made) is logged.
func (d *docsLab) kubectl(stdin string, args ...string) string {
	d.t.Helper()
	cmd := exec.Command(meshlabBin(d.t), append([]string{"--lab", d.name}, args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		d.t.Fatalf("meshlab %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	if stderr.Len() > 0 {
		d.t.Logf("meshlab %s (stderr):\n%s", strings.Join(args, " "), stderr.String())
	}
	return string(out)
}

// says runs kubectl and fails unless its stdout is want exactly.
func (d *docsLab) says(want, stdin string, args ...string) {
	d.t.Helper()
	if out := d.kubectl(stdin, args...); out != want {
		d.t.Errorf("meshlab %s:\n%s\nwant (as kubectl prints it):\n%s", strings.Join(args, " "), out, want)
	}
}

// outside runs the reader's command in the lab's outside world and returns its output
// (stdout and stderr) and exit code.
func (d *docsLab) outside(args ...string) (string, int) {
	d.t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", lab.WorldNamespace(d.name)}, args...)...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	case err != nil:
		d.t.Fatalf("%s: %v", strings.Join(args, " "), err)
	}
	return string(out), 0
}

// until runs f until ok accepts its output, for at most 30 s (config reaches the
// gateway over xDS after apply returns, and a loaded machine is slow), and returns the
// accepted output.
func (d *docsLab) until(what string, f func() string, ok func(string) bool) string {
	d.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out := f()
		if ok(out) {
			return out
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("not within 30 s: %s; last output:\n%s", what, out)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// elided reports whether got holds want's lines in order, "..." in want standing for
// any lines, as istio.io's tests compare a page's elided output (a line's trailing
// spaces and carriage return are not compared: curl prints "HTTP/2 200 \r").
func elided(got, want string) bool {
	lines := strings.Split(strings.ReplaceAll(got, "\r", ""), "\n")
	i := 0
	for _, w := range strings.Split(strings.TrimSpace(want), "\n") {
		if w == "..." {
			continue
		}
		for i < len(lines) && strings.TrimRight(lines[i], " ") != w {
			i++
		}
		if i == len(lines) {
			return false
		}
		i++
	}
	return true
}

// requireHostTool fails (CI) or skips when the reader's tool is missing on the host.
func requireHostTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not installed; the page runs it", name)
		}
		t.Skipf("%s is not installed; the page runs it", name)
	}
}

// The Ingress Gateways page's objects, Istio API and Gateway API, as it writes them.
const (
	docsHTTPBinGateway = `apiVersion: networking.istio.io/v1alpha3
kind: Gateway
metadata:
  name: httpbin-gateway
spec:
  selector:
    istio: ingressgateway # use Istio default gateway implementation
  servers:
  - port:
      number: 80
      name: http
      protocol: HTTP
    hosts:
    - "httpbin.example.com"
`
	docsHTTPBinVirtualService = `apiVersion: networking.istio.io/v1alpha3
kind: VirtualService
metadata:
  name: httpbin
spec:
  hosts:
  - "httpbin.example.com"
  gateways:
  - httpbin-gateway
  http:
  - match:
    - uri:
        prefix: /status
    - uri:
        prefix: /delay
    route:
    - destination:
        port:
          number: 8000
        host: httpbin
`
	docsHTTPBinWildcard = `apiVersion: networking.istio.io/v1alpha3
kind: Gateway
metadata:
  name: httpbin-gateway
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
---
apiVersion: networking.istio.io/v1alpha3
kind: VirtualService
metadata:
  name: httpbin
spec:
  hosts:
  - "*"
  gateways:
  - httpbin-gateway
  http:
  - match:
    - uri:
        prefix: /headers
    route:
    - destination:
        port:
          number: 8000
        host: httpbin
`
	docsHTTPBinK8sGateway = `apiVersion: gateway.networking.k8s.io/v1beta1
kind: Gateway
metadata:
  name: httpbin-gateway
spec:
  gatewayClassName: istio
  listeners:
  - name: http
    hostname: "httpbin.example.com"
    port: 80
    protocol: HTTP
    allowedRoutes:
      namespaces:
        from: Same
`
	docsHTTPBinHTTPRoute = `apiVersion: gateway.networking.k8s.io/v1beta1
kind: HTTPRoute
metadata:
  name: httpbin
spec:
  parentRefs:
  - name: httpbin-gateway
  hostnames: ["httpbin.example.com"]
  rules:
  - matches:
    - path:
        type: PathPrefix
        value: /status
    - path:
        type: PathPrefix
        value: /delay
    backendRefs:
    - name: httpbin
      port: 8000
`
)

// TestDocsIngressGatewaysTask walks istio.io's "Ingress Gateways": httpbin, the Istio
// API's Gateway and VirtualService, `get svc istio-ingressgateway -n istio-system` (a
// LoadBalancer with an EXTERNAL-IP), INGRESS_HOST and the ports from the page's
// jsonpath, the page's curl -s -I for /status/200 (200, server: istio-envoy) and for
// /headers (404) from outside the cluster, the browser section's wildcard host, and the
// page's cleanup.
func TestDocsIngressGatewaysTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	d, samples := httpbinTask(t, "default")
	d.says("gateway.networking.istio.io/httpbin-gateway created\n", docsHTTPBinGateway, "apply", "-f", "-")
	d.says("virtualservice.networking.istio.io/httpbin created\n", docsHTTPBinVirtualService, "apply", "-f", "-")

	// Determining the ingress IP and ports.
	svc := d.kubectl("", "get", "svc", "istio-ingressgateway", "-n", "istio-system")
	if !regexp.MustCompile(`^NAME\s+TYPE\s+CLUSTER-IP\s+EXTERNAL-IP\s+PORT\(S\)\s+AGE\nistio-ingressgateway\s+LoadBalancer\s+\d+\.\d+\.\d+\.\d+\s+\d+\.\d+\.\d+\.\d+\s+\S+\s+\S+\n$`).MatchString(svc) {
		t.Errorf("get svc istio-ingressgateway -n istio-system:\n%s\nwant one LoadBalancer row with its EXTERNAL-IP set", svc)
	}
	jsonpath := func(path string) string {
		return d.kubectl("", "-n", "istio-system", "get", "service", "istio-ingressgateway", "-o", "jsonpath="+path)
	}
	host := jsonpath("{.status.loadBalancer.ingress[0].ip}")
	port := jsonpath(`{.spec.ports[?(@.name=="http2")].port}`)
	secure := jsonpath(`{.spec.ports[?(@.name=="https")].port}`)
	tcp := jsonpath(`{.spec.ports[?(@.name=="tcp")].port}`)
	if !strings.Contains(svc, " "+host+" ") || port != "80" || secure != "443" || tcp != "31400" {
		t.Fatalf("INGRESS_HOST=%q INGRESS_PORT=%q SECURE_INGRESS_PORT=%q TCP_INGRESS_PORT=%q; want the EXTERNAL-IP, 80, 443 and 31400", host, port, secure, tcp)
	}

	// Accessing ingress services, from outside the cluster.
	d.statusAndHeaders(host, port)

	// Accessing ingress services using a browser: any host, /headers.
	d.says("gateway.networking.istio.io/httpbin-gateway configured\nvirtualservice.networking.istio.io/httpbin configured\n", docsHTTPBinWildcard, "apply", "-f", "-")
	d.until("curl -s -I http://$INGRESS_HOST:$INGRESS_PORT/headers answers 200 without a Host", func() string {
		out, _ := d.outside("curl", "-s", "-I", "http://"+host+":"+port+"/headers")
		return out
	}, func(out string) bool { return strings.Contains(out, "HTTP/1.1 200 OK") })

	// Cleanup (Istio API). With the Gateway API's kinds installed, `gateway` names the
	// Gateway API's Gateway, as kubectl resolves it in such a cluster: the page's
	// `delete gateway httpbin-gateway` finds nothing there, and Istio's short name gw is
	// the one that names the Istio Gateway.
	if out, err := meshlab(t, "--lab", d.name, "delete", "gateway", "httpbin-gateway"); err == nil {
		t.Errorf("delete gateway httpbin-gateway with no Gateway API Gateway of that name: %s\nwant it not found, as kubectl", out)
	}
	d.says("gateway.networking.istio.io \"httpbin-gateway\" deleted\n", "", "delete", "gw", "httpbin-gateway")
	d.says("virtualservice.networking.istio.io \"httpbin\" deleted\n", "", "delete", "virtualservice", "httpbin")
	d.says("serviceaccount \"httpbin\" deleted\nservice \"httpbin\" deleted\ndeployment.apps \"httpbin\" deleted\n", "",
		"delete", "--ignore-not-found=true", "-f", filepath.Join(samples, "httpbin/httpbin.yaml"))
	d.run("uninstall", "-y", "--purge")
}

// TestDocsIngressGatewaysGatewayAPITask walks the Gateway API tab of istio.io's "Ingress
// Gateways": httpbin, its Gateway, `wait --for=condition=programmed` (the page's
// `condition=ready` is a condition today's Istio no longer sets), the HTTPRoute,
// INGRESS_HOST and INGRESS_PORT from the Gateway's status and listener, the page's two
// curls from outside the cluster (200 with server: istio-envoy, 404), and its cleanup.
func TestDocsIngressGatewaysGatewayAPITask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	d, samples := httpbinTask(t, "minimal")
	d.says("gateway.gateway.networking.k8s.io/httpbin-gateway created\n", docsHTTPBinK8sGateway, "apply", "-f", "-")
	d.says("gateway.gateway.networking.k8s.io/httpbin-gateway condition met\n", "", "wait", "--for=condition=programmed", "gtw", "httpbin-gateway", "--timeout=60s")
	d.says("httproute.gateway.networking.k8s.io/httpbin created\n", docsHTTPBinHTTPRoute, "apply", "-f", "-")
	host := d.kubectl("", "get", "gtw", "httpbin-gateway", "-o", "jsonpath={.status.addresses[*].value}")
	port := d.kubectl("", "get", "gtw", "httpbin-gateway", "-o", `jsonpath={.spec.listeners[?(@.name=="http")].port}`)
	if !regexp.MustCompile(`^\d+\.\d+\.\d+\.\d+$`).MatchString(host) || port != "80" {
		t.Fatalf("Gateway API INGRESS_HOST=%q INGRESS_PORT=%q", host, port)
	}
	d.statusAndHeaders(host, port)
	d.says("gateway.gateway.networking.k8s.io \"httpbin-gateway\" deleted\n", "", "delete", "gtw", "httpbin-gateway")
	d.says("httproute.gateway.networking.k8s.io \"httpbin\" deleted\n", "", "delete", "httproute", "httpbin")
	d.says("serviceaccount \"httpbin\" deleted\nservice \"httpbin\" deleted\ndeployment.apps \"httpbin\" deleted\n", "",
		"delete", "--ignore-not-found=true", "-f", filepath.Join(samples, "httpbin/httpbin.yaml"))
	d.run("uninstall", "-y", "--purge")
}

// tcpEchoTask is the TCP Traffic Shifting page's client: `(date; sleep 1) | nc
// $INGRESS_HOST $TCP_INGRESS_PORT` run from the sleep pod of ns, and tcp-echo's answers
// ("one <date>", "two <date>") counted by version.
type tcpEchoTask struct {
	d              *docsLab
	ns, host, port string
	sleep          string // the sleep pod, as the page's SLEEP=$(kubectl get pod -l app=sleep ...)
}

// tcpEchoAnswer is one answer of tcp-echo: its version's word and the date it was sent.
var tcpEchoAnswer = regexp.MustCompile(`^(one|two) \w{3} \w{3} +\d+ \d\d:\d\d:\d\d UTC \d{4}$`)

func (d *docsLab) tcpEcho(ns, host, port string) *tcpEchoTask {
	d.t.Helper()
	sleep := d.until("SLEEP=$(get pod -l app=sleep -o jsonpath=...)", func() string {
		out, _ := meshlab(d.t, "--lab", d.name, "get", "pod", "-l", "app=sleep", "-n", ns, "-o", "jsonpath={.items..metadata.name}")
		return out
	}, func(s string) bool { return strings.HasPrefix(s, "sleep-") && !strings.Contains(s, " ") })
	return &tcpEchoTask{d: d, ns: ns, host: host, port: port, sleep: sleep}
}

// loop runs the page's command n times, a few at once (each holds its connection for
// the page's second), and returns what each printed.
func (e *tcpEchoTask) loop(n int) []string {
	out := make([]string, n)
	var wg sync.WaitGroup
	slots := make(chan struct{}, 5)
	for i := range out {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			o, _ := meshlab(e.d.t, "--lab", e.d.name, "exec", e.sleep, "-c", "sleep", "-n", e.ns, "--",
				"sh", "-c", "(date; sleep 1) | nc "+e.host+" "+e.port)
			out[i] = strings.TrimSpace(o)
		})
	}
	wg.Wait()
	return out
}

// count counts lines by version, and the lines that are no answer of tcp-echo.
func (e *tcpEchoTask) count(lines []string) (one, two int, bad []string) {
	for _, l := range lines {
		switch m := tcpEchoAnswer.FindStringSubmatch(l); {
		case m == nil:
			bad = append(bad, l)
		case m[1] == "one":
			one++
		default:
			two++
		}
	}
	return one, two, bad
}

// allToV1 waits for the gateway's listener (it comes with the Gateway) to answer, then
// wants the page's ten answers all "one".
func (e *tcpEchoTask) allToV1() {
	e.d.t.Helper()
	e.d.until("(date; sleep 1) | nc $INGRESS_HOST $TCP_INGRESS_PORT answers \"one <date>\"", func() string { return e.loop(1)[0] },
		func(s string) bool { return tcpEchoAnswer.MatchString(s) && strings.HasPrefix(s, "one ") })
	if one, two, bad := e.count(e.loop(10)); one != 10 {
		e.d.t.Errorf("all to v1: %d one, %d two, other: %q; want every answer \"one <date>\"", one, two, bad)
	}
}

// shifted wants the 80/20 route's answers: the gateway runs it once a "two" answers; from
// then on, both, "one" the more.
func (e *tcpEchoTask) shifted() {
	e.d.t.Helper()
	var lines []string
	e.d.until("a \"two\" after tcp-echo-20-v2", func() string {
		lines = e.loop(10)
		return strings.Join(lines, "\n")
	}, func(string) bool { _, two, _ := e.count(lines); return two > 0 })
	lines = append(lines, e.loop(20)...)
	if one, two, bad := e.count(lines); len(bad) > 0 || two == 0 || one <= two {
		e.d.t.Errorf("80/20: %d one, %d two, other: %q; want both, one the more", one, two, bad)
	}
}

// TestDocsTCPTrafficShiftingTask walks istio.io's "TCP Traffic Shifting" (Istio API):
// its namespace, Istio's sleep and tcp-echo samples applied with -n, tcp-echo-all-v1
// (Gateway on the ingress gateway's 31400, subsets v1 and v2, all to v1), INGRESS_HOST
// and TCP_INGRESS_PORT from the Ingress Gateways page's jsonpath, and the page's loop
// `exec $SLEEP -c sleep -- sh -c "(date; sleep 1) | nc $INGRESS_HOST $TCP_INGRESS_PORT"`
// (the curl image's busybox nc: meshlab's), every answer "one <date>"; then
// tcp-echo-20-v2 and `get virtualservice tcp-echo -o yaml` showing the page's 80/20
// route, after which both "one" and "two" answer, "one" the more. The loop's iterations
// run a few at once (each holds its connection for the page's second).
func TestDocsTCPTrafficShiftingTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	samples := testutil.IstioSamples(t)
	d := startDocsLab(t)
	const ns = "istio-io-tcp-traffic-shifting"

	d.run("install", "--set", "profile=demo", "-y")
	d.says("namespace/"+ns+" created\n", "", "create", "namespace", ns)
	d.says("serviceaccount/sleep created\nservice/sleep created\ndeployment.apps/sleep created\n", "",
		"apply", "-f", filepath.Join(samples, "sleep/sleep.yaml"), "-n", ns)
	d.says("service/tcp-echo created\ndeployment.apps/tcp-echo-v1 created\ndeployment.apps/tcp-echo-v2 created\n", "",
		"apply", "-f", filepath.Join(samples, "tcp-echo/tcp-echo-services.yaml"), "-n", ns)
	d.says("gateway.networking.istio.io/tcp-echo-gateway created\ndestinationrule.networking.istio.io/tcp-echo-destination created\nvirtualservice.networking.istio.io/tcp-echo created\n", "",
		"apply", "-f", filepath.Join(samples, "tcp-echo/tcp-echo-all-v1.yaml"), "-n", ns)
	host := d.kubectl("", "-n", "istio-system", "get", "service", "istio-ingressgateway", "-o", "jsonpath={.status.loadBalancer.ingress[0].ip}")
	port := d.kubectl("", "-n", "istio-system", "get", "service", "istio-ingressgateway", "-o", `jsonpath={.spec.ports[?(@.name=="tcp")].port}`)
	if port != "31400" {
		t.Fatalf("TCP_INGRESS_PORT=%q, want 31400", port)
	}
	echo := d.tcpEcho(ns, host, port)
	echo.allToV1()

	d.says("virtualservice.networking.istio.io/tcp-echo configured\n", "", "apply", "-f", filepath.Join(samples, "tcp-echo/tcp-echo-20-v2.yaml"), "-n", ns)
	vs := d.kubectl("", "get", "virtualservice", "tcp-echo", "-o", "yaml", "-n", ns)
	if !elided(vs, `kind: VirtualService
...
spec:
...
  tcp:
  - match:
    - port: 31400
    route:
    - destination:
        host: tcp-echo
        port:
          number: 9000
        subset: v1
      weight: 80
    - destination:
        host: tcp-echo
        port:
          number: 9000
        subset: v2
      weight: 20`) {
		t.Errorf("get virtualservice tcp-echo -o yaml:\n%s\nwant the page's 80/20 tcp route", vs)
	}
	echo.shifted()

	d.says("gateway.networking.istio.io \"tcp-echo-gateway\" deleted\ndestinationrule.networking.istio.io \"tcp-echo-destination\" deleted\nvirtualservice.networking.istio.io \"tcp-echo\" deleted\n", "",
		"delete", "-f", filepath.Join(samples, "tcp-echo/tcp-echo-all-v1.yaml"), "-n", ns)
	d.run("delete", "-f", filepath.Join(samples, "sleep/sleep.yaml"), "-n", ns)
	d.run("delete", "-f", filepath.Join(samples, "tcp-echo/tcp-echo-services.yaml"), "-n", ns)
	d.says("namespace \""+ns+"\" deleted\n", "", "delete", "namespace", ns)
}

// docsCerts runs the Secure Gateways page's openssl lines in a directory of the test's
// and returns it: example_certs1 (root example.com, httpbin.example.com and
// client.example.com signed by it) and example_certs2 (another root and its
// httpbin.example.com).
func docsCerts(t *testing.T) string {
	t.Helper()
	requireHostTool(t, "openssl")
	dir := t.TempDir()
	for _, line := range []string{
		"mkdir example_certs1",
		"openssl req -x509 -sha256 -nodes -days 365 -newkey rsa:2048 -subj '/O=example Inc./CN=example.com' -keyout example_certs1/example.com.key -out example_certs1/example.com.crt",
		`openssl req -out example_certs1/httpbin.example.com.csr -newkey rsa:2048 -nodes -keyout example_certs1/httpbin.example.com.key -subj "/CN=httpbin.example.com/O=httpbin organization"`,
		"openssl x509 -req -sha256 -days 365 -CA example_certs1/example.com.crt -CAkey example_certs1/example.com.key -set_serial 0 -in example_certs1/httpbin.example.com.csr -out example_certs1/httpbin.example.com.crt",
		"mkdir example_certs2",
		"openssl req -x509 -sha256 -nodes -days 365 -newkey rsa:2048 -subj '/O=example Inc./CN=example.com' -keyout example_certs2/example.com.key -out example_certs2/example.com.crt",
		`openssl req -out example_certs2/httpbin.example.com.csr -newkey rsa:2048 -nodes -keyout example_certs2/httpbin.example.com.key -subj "/CN=httpbin.example.com/O=httpbin organization"`,
		"openssl x509 -req -sha256 -days 365 -CA example_certs2/example.com.crt -CAkey example_certs2/example.com.key -set_serial 0 -in example_certs2/httpbin.example.com.csr -out example_certs2/httpbin.example.com.crt",
		`openssl req -out example_certs1/client.example.com.csr -newkey rsa:2048 -nodes -keyout example_certs1/client.example.com.key -subj "/CN=client.example.com/O=client organization"`,
		"openssl x509 -req -sha256 -days 365 -CA example_certs1/example.com.crt -CAkey example_certs1/example.com.key -set_serial 1 -in example_certs1/client.example.com.csr -out example_certs1/client.example.com.crt",
	} {
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
	}
	return dir
}

// The Secure Gateways page's Gateway (SIMPLE; MUTUAL by its own copy with that mode) and
// VirtualService.
const (
	docsMyGateway = `apiVersion: networking.istio.io/v1alpha3
kind: Gateway
metadata:
  name: mygateway
spec:
  selector:
    istio: ingressgateway # use istio default ingress gateway
  servers:
  - port:
      number: 443
      name: https
      protocol: HTTPS
    tls:
      mode: SIMPLE
      credentialName: httpbin-credential # must be the same as secret
    hosts:
    - httpbin.example.com
`
	docsMyGatewayVirtualService = `apiVersion: networking.istio.io/v1alpha3
kind: VirtualService
metadata:
  name: httpbin
spec:
  hosts:
  - "httpbin.example.com"
  gateways:
  - mygateway
  http:
  - match:
    - uri:
        prefix: /status
    - uri:
        prefix: /delay
    route:
    - destination:
        port:
          number: 8000
        host: httpbin
`
)

// TestDocsSecureGatewaysTask walks istio.io's "Secure Gateways" (Istio API) from outside
// the cluster: the page's openssl certificates, `create -n istio-system secret tls
// httpbin-credential --key --cert`, its SIMPLE Gateway and VirtualService, INGRESS_HOST
// and SECURE_INGRESS_PORT from the Ingress Gateways page's jsonpath, and `curl -v
// -HHost:httpbin.example.com --resolve "httpbin.example.com:$SECURE_INGRESS_PORT:$INGRESS_HOST"
// --cacert example_certs1/example.com.crt https://httpbin.example.com:$SECURE_INGRESS_PORT/status/418`
// (HTTP/2 418, go-httpbin's teapot); the secret replaced by example_certs2's, trusted by
// its own root and refused by the first; then "Configure a mutual TLS ingress gateway": a
// generic secret with --from-file tls.key, tls.crt and ca.crt, the Gateway's MUTUAL mode,
// curl without a client certificate refused as the page shows (the TLS alert
// "certificate required"), and with --cert/--key the teapot.
func TestDocsSecureGatewaysTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	certs := docsCerts(t)
	f := func(name string) string { return filepath.Join(certs, name) }
	d, _ := httpbinTask(t, "default")
	d.says("secret/httpbin-credential created\n", "", "create", "-n", "istio-system", "secret", "tls", "httpbin-credential",
		"--key="+f("example_certs1/httpbin.example.com.key"), "--cert="+f("example_certs1/httpbin.example.com.crt"))
	d.says("gateway.networking.istio.io/mygateway created\n", docsMyGateway, "apply", "-f", "-")
	d.says("virtualservice.networking.istio.io/httpbin created\n", docsMyGatewayVirtualService, "apply", "-f", "-")
	host := d.kubectl("", "-n", "istio-system", "get", "service", "istio-ingressgateway", "-o", "jsonpath={.status.loadBalancer.ingress[0].ip}")
	port := d.kubectl("", "-n", "istio-system", "get", "service", "istio-ingressgateway", "-o", `jsonpath={.spec.ports[?(@.name=="https")].port}`)
	if port != "443" {
		t.Fatalf("SECURE_INGRESS_PORT=%q, want 443", port)
	}
	curl := func(args ...string) func() string {
		return func() string {
			out, code := d.outside(append([]string{"curl", "--max-time", "10", "-v", "-HHost:httpbin.example.com",
				"--resolve", "httpbin.example.com:" + port + ":" + host}, append(args, "https://httpbin.example.com:"+port+"/status/418")...)...)
			return out + "\n(curl exit " + strconv.Itoa(code) + ")"
		}
	}
	// The page's "HTTP/2 418" is curl -v's "< HTTP/2 418 "; go-httpbin's teapot says so
	// in words where the page shows kennethreitz httpbin's drawing.
	teapot := func(out string) bool {
		return strings.Contains(strings.ReplaceAll(out, "\r", ""), "\n< HTTP/2 418 \n") && strings.Contains(out, "I'm a teapot!")
	}
	d.until("SIMPLE: curl --cacert example_certs1/example.com.crt gets the teapot", curl("--cacert", f("example_certs1/example.com.crt")), teapot)

	// The secret replaced by example_certs2's: its root verifies, the first no longer.
	d.says("secret \"httpbin-credential\" deleted\n", "", "-n", "istio-system", "delete", "secret", "httpbin-credential")
	d.says("secret/httpbin-credential created\n", "", "create", "-n", "istio-system", "secret", "tls", "httpbin-credential",
		"--key="+f("example_certs2/httpbin.example.com.key"), "--cert="+f("example_certs2/httpbin.example.com.crt"))
	d.until("curl --cacert example_certs2/example.com.crt gets the teapot", curl("--cacert", f("example_certs2/example.com.crt")), teapot)
	if out := curl("--cacert", f("example_certs1/example.com.crt"))(); teapot(out) || strings.HasSuffix(out, "(curl exit 0)") {
		t.Errorf("curl --cacert example_certs1/example.com.crt against example_certs2's certificate:\n%s\nwant the handshake refused", out)
	}

	// Configure a mutual TLS ingress gateway.
	d.says("secret \"httpbin-credential\" deleted\n", "", "-n", "istio-system", "delete", "secret", "httpbin-credential")
	d.says("secret/httpbin-credential created\n", "", "create", "-n", "istio-system", "secret", "generic", "httpbin-credential",
		"--from-file=tls.key="+f("example_certs1/httpbin.example.com.key"),
		"--from-file=tls.crt="+f("example_certs1/httpbin.example.com.crt"),
		"--from-file=ca.crt="+f("example_certs1/example.com.crt"))
	d.says("gateway.networking.istio.io/mygateway configured\n", strings.Replace(docsMyGateway, "mode: SIMPLE", "mode: MUTUAL", 1), "apply", "-f", "-")
	// The page's failure: the handshake completes, then SSL_read meets the server's TLS
	// alert (curl exit 56). Envoy's BoringSSL sends "certificate required"; the built-in
	// proxy's Go TLS sends "bad certificate".
	d.until("MUTUAL: curl without a client certificate refused as the page shows", curl("--cacert", f("example_certs1/example.com.crt")),
		func(out string) bool {
			return strings.Contains(out, "TLS alert") && strings.Contains(out, "SSL_read") && strings.HasSuffix(out, "(curl exit 56)")
		})
	d.until("MUTUAL: curl --cert --key gets the teapot", curl("--cacert", f("example_certs1/example.com.crt"),
		"--cert", f("example_certs1/client.example.com.crt"), "--key", f("example_certs1/client.example.com.key")), teapot)
}

// The Egress Gateways page's objects for HTTP traffic (Istio API), as it writes them.
const (
	docsCNNEntry = `apiVersion: networking.istio.io/v1alpha3
kind: ServiceEntry
metadata:
  name: cnn
spec:
  hosts:
  - edition.cnn.com
  ports:
  - number: 80
    name: http-port
    protocol: HTTP
  - number: 443
    name: https
    protocol: HTTPS
  resolution: DNS
`
	docsCNNEgressGateway = `apiVersion: networking.istio.io/v1alpha3
kind: Gateway
metadata:
  name: istio-egressgateway
spec:
  selector:
    istio: egressgateway
  servers:
  - port:
      number: 80
      name: http
      protocol: HTTP
    hosts:
    - edition.cnn.com
---
apiVersion: networking.istio.io/v1alpha3
kind: DestinationRule
metadata:
  name: egressgateway-for-cnn
spec:
  host: istio-egressgateway.istio-system.svc.cluster.local
  subsets:
  - name: cnn
`
	docsCNNThroughEgress = `apiVersion: networking.istio.io/v1alpha3
kind: VirtualService
metadata:
  name: direct-cnn-through-egress-gateway
spec:
  hosts:
  - edition.cnn.com
  gateways:
  - istio-egressgateway
  - mesh
  http:
  - match:
    - gateways:
      - mesh
      port: 80
    route:
    - destination:
        host: istio-egressgateway.istio-system.svc.cluster.local
        subset: cnn
        port:
          number: 80
      weight: 100
  - match:
    - gateways:
      - istio-egressgateway
      port: 80
    route:
    - destination:
        host: edition.cnn.com
        port:
          number: 80
      weight: 100
`
)

// TestDocsEgressGatewaysTask walks istio.io's "Egress Gateways" for HTTP traffic (Istio
// API) on Istio's sleep sample, edition.cnn.com being the lab's outside world (never the
// real site): an install with the page's meshConfig.accessLogFile, SOURCE_POD by label,
// the cnn ServiceEntry and the page's `exec "$SOURCE_POD" -c sleep -- curl -sSL -o
// /dev/null -D - http://edition.cnn.com/politics` (301 to https, then HTTP/2 200), the
// Gateway and DestinationRule, `get pod -l istio=egressgateway -n istio-system`, the
// VirtualService through the gateway, the same curl, `logs -l istio=egressgateway -c
// istio-proxy -n istio-system` holding the page's "GET /politics HTTP/2" 301 line to
// outbound|80||edition.cnn.com, and the page's cleanup.
func TestDocsEgressGatewaysTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	samples := testutil.IstioSamples(t)
	d := startDocsLab(t)

	d.run("install", "--set", "profile=demo", "--set", "meshConfig.accessLogFile=/dev/stdout", "-y")
	d.run("label", "namespace", "default", "istio-injection=enabled", "--overwrite")
	d.says("serviceaccount/sleep created\nservice/sleep created\ndeployment.apps/sleep created\n", "", "apply", "-f", filepath.Join(samples, "sleep/sleep.yaml"))
	source := d.until("SOURCE_POD=$(get pod -l app=sleep -o jsonpath=...)", func() string {
		out, _ := meshlab(t, "--lab", d.name, "get", "pod", "-l", "app=sleep", "-o", "jsonpath={.items..metadata.name}")
		return out
	}, func(s string) bool { return strings.HasPrefix(s, "sleep-") && !strings.Contains(s, " ") })

	d.says("serviceentry.networking.istio.io/cnn created\n", docsCNNEntry, "apply", "-f", "-")
	const politics = "...\nHTTP/1.1 301 Moved Permanently\n...\nlocation: https://edition.cnn.com/politics\n...\n\nHTTP/2 200\ncontent-type: text/html; charset=utf-8\n..."
	curl := func() string {
		out, _ := meshlab(t, "--lab", d.name, "exec", source, "-c", "sleep", "--", "curl", "-sSL", "-o", "/dev/null", "-D", "-", "http://edition.cnn.com/politics")
		return out
	}
	// HTTP/2's header names are lowercase; the page prints this one capitalized.
	answered := func(out string) bool { return elided(strings.ToLower(out), strings.ToLower(politics)) }
	d.until("curl -sSL -o /dev/null -D - http://edition.cnn.com/politics prints the page's output", curl, answered)

	d.says("gateway.networking.istio.io/istio-egressgateway created\ndestinationrule.networking.istio.io/egressgateway-for-cnn created\n", docsCNNEgressGateway, "apply", "-f", "-")
	d.until("get pod -l istio=egressgateway -n istio-system shows the gateway running", func() string {
		out, _ := meshlab(t, "--lab", d.name, "get", "pod", "-l", "istio=egressgateway", "-n", "istio-system")
		return out
	}, func(out string) bool {
		// Istio's gateway pod is 1/1: istio-proxy alone.
		return regexp.MustCompile(`(?m)^NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\nistio-egressgateway-\S+\s+1/1\s+Running\s+0\s+\S+$`).MatchString(out)
	})
	d.says("virtualservice.networking.istio.io/direct-cnn-through-egress-gateway created\n", docsCNNThroughEgress, "apply", "-f", "-")
	d.until("the curl through the egress gateway, logged by it", func() string {
		out := curl()
		if !answered(out) {
			return out
		}
		logs, _ := meshlab(t, "--lab", d.name, "logs", "-l", "istio=egressgateway", "-c", "istio-proxy", "-n", "istio-system")
		return logs
	}, func(logs string) bool {
		for _, l := range strings.Split(logs, "\n") {
			if strings.Contains(l, `"GET /politics HTTP/2" 301 `) && strings.Contains(l, " outbound|80||edition.cnn.com ") && strings.Contains(l, `"edition.cnn.com"`) {
				return true
			}
		}
		return false
	})

	// Cleanup; `delete gateway` names the Gateway API's kind (see the ingress walk), gw
	// Istio's.
	d.says("serviceentry.networking.istio.io \"cnn\" deleted\n", "", "delete", "serviceentry", "cnn")
	d.says("gateway.networking.istio.io \"istio-egressgateway\" deleted\n", "", "delete", "gw", "istio-egressgateway")
	d.says("virtualservice.networking.istio.io \"direct-cnn-through-egress-gateway\" deleted\n", "", "delete", "virtualservice", "direct-cnn-through-egress-gateway")
	d.says("destinationrule.networking.istio.io \"egressgateway-for-cnn\" deleted\n", "", "delete", "destinationrule", "egressgateway-for-cnn")
}
