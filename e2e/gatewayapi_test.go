package e2e

import (
	"bufio"
	"net"
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

// gatewayAPIIngress is the Kubernetes Gateway API form of Istio's "Ingress Gateways" task,
// as the task writes it: a Gateway of class istio in istio-ingress admitting routes from
// every namespace, and an HTTPRoute in default for httpbin.example.com's /status and
// /delay.
const gatewayAPIIngress = `apiVersion: v1
kind: Namespace
metadata:
  name: istio-ingress
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: httpbin-gateway
  namespace: istio-ingress
spec:
  gatewayClassName: istio
  listeners:
  - name: default
    hostname: "*.example.com"
    port: 80
    protocol: HTTP
    allowedRoutes:
      namespaces:
        from: All
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: http
  namespace: default
spec:
  parentRefs:
  - name: httpbin-gateway
    namespace: istio-ingress
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

// TestGatewayAPIIngress runs the Gateway API form of Istio's ingress task against a
// running lab: httpbin's Deployment, then the Gateway and HTTPRoute applied live bring
// Istio's automated deployment (pod and Service httpbin-gateway-istio in istio-ingress),
// `get gtw` shows it programmed with its Service's address, and through
// `port-forward svc/httpbin-gateway-istio :80` curl with Host httpbin.example.com gets
// 200 for /status/200 and 404 for /headers (no route), as the task documents.
func TestGatewayAPIIngress(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, "testdata/live-pods-base.yaml")
	out, err := meshlab(t, "apply", "--name", l.name, "-f", "testdata/live-pods-httpbin.yaml")
	if err != nil {
		t.Fatalf("apply httpbin: %v\n%s", err, out)
	}
	f := filepath.Join(t.TempDir(), "gateway-api.yaml")
	if err := os.WriteFile(f, []byte(gatewayAPIIngress), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = meshlab(t, "apply", "--name", l.name, "-f", f)
	if err != nil || !regexp.MustCompile(`(?m)^pod istio-ingress/httpbin-gateway-istio-[a-z0-9]+-[a-z0-9]{5} created$`).MatchString(out) {
		t.Fatalf("apply the Gateway and HTTPRoute: %v\n%s\nwant the automated deployment's pod created in istio-ingress", err, out)
	}

	// kubectl get gtw: CLASS istio, ADDRESS the Service's VIP, PROGRAMMED True.
	deadline := time.Now().Add(30 * time.Second)
	var row []string
	for {
		out, err = meshlab(t, "get", "--name", l.name, "gtw", "-n", "istio-ingress")
		if err != nil {
			t.Fatalf("get gtw: %v\n%s", err, out)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) == 2 && strings.Join(strings.Fields(lines[0]), " ") == "NAME CLASS ADDRESS PROGRAMMED AGE" {
			row = strings.Fields(lines[1])
			if len(row) == 5 && row[3] == "True" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("get gtw -n istio-ingress:\n%s\nwant one row httpbin-gateway istio <VIP> True <age>", out)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if row[0] != "httpbin-gateway" || row[1] != "istio" || net.ParseIP(row[2]) == nil {
		t.Errorf("get gtw row %q; want httpbin-gateway istio <Service VIP> True", row)
	}

	addr := portForwardSvc(t, l.name, "istio-ingress", "svc/httpbin-gateway-istio", "80")
	curlHead := func(path string) string {
		t.Helper()
		var last string
		for range 40 {
			b, _ := exec.Command("curl", "-s", "-I", "--max-time", "5", "-H", "Host:httpbin.example.com", "http://"+addr+path).CombinedOutput()
			last = string(b)
			if strings.HasPrefix(last, "HTTP/1.1 ") {
				return last
			}
			time.Sleep(250 * time.Millisecond)
		}
		return last
	}
	if got := curlHead("/status/200"); !strings.HasPrefix(got, "HTTP/1.1 200 OK") || !strings.Contains(got, "x-envoy-upstream-service-time:") {
		t.Errorf("curl -I -H Host:httpbin.example.com %s/status/200:\n%s\nwant HTTP/1.1 200 OK through the gateway proxy (x-envoy-upstream-service-time)", addr, got)
	}
	if got := curlHead("/delay/1"); !strings.HasPrefix(got, "HTTP/1.1 200 OK") {
		t.Errorf("curl /delay/1 through the gateway:\n%s\nwant 200", got)
	}
	if got := curlHead("/headers"); !strings.HasPrefix(got, "HTTP/1.1 404 Not Found") {
		t.Errorf("curl /headers through the gateway:\n%s\nwant 404 (the HTTPRoute has no /headers)", got)
	}

	// Deleting the Gateway takes its automated deployment away.
	out, err = meshlab(t, "delete", "--name", l.name, "-n", "istio-ingress", "gtw", "httpbin-gateway")
	if err != nil || !regexp.MustCompile(`(?m)^pod istio-ingress/httpbin-gateway-istio-\S+ deleted$`).MatchString(out) {
		t.Errorf("delete gtw httpbin-gateway: %v\n%s\nwant its pod deleted", err, out)
	}
}

// portForwardSvc runs `meshlab port-forward -n NS TARGET :REMOTE` and returns the
// 127.0.0.1 address it listens on; the forwarder stops when the test ends.
func portForwardSvc(t *testing.T, lab, ns, target, remote string) string {
	t.Helper()
	cmd := exec.Command(meshlabBin(t), "port-forward", "--name", lab, "-n", ns, target, ":"+remote)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "Forwarding from "); ok {
				a, _, _ = strings.Cut(a, " ")
				addr <- a
			}
		}
	}()
	select {
	case a := <-addr:
		if host, _, _ := net.SplitHostPort(a); host != "127.0.0.1" {
			t.Fatalf("port-forward listens on %s, want 127.0.0.1", a)
		}
		return a
	case <-time.After(20 * time.Second):
		t.Fatal("port-forward printed no Forwarding line")
	}
	return ""
}

// TestGatewayAPIAtUp: the same objects at `meshlab up` bring the automated deployment
// with the lab, up prints the port-forward command for it, and that command reaches
// httpbin with Host httpbin.example.com while /headers and /statusx have no route (404).
func TestGatewayAPIAtUp(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, "testdata/gatewayapi-ingress.yaml")
	want := "Gateway istio-ingress/httpbin-gateway: meshlab port-forward --name " + l.name + " -n istio-ingress svc/httpbin-gateway-istio 8080:80 &"
	// up prints its hints after the "is up" line startLab waits for.
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(l.out.String(), want); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("up output lacks %q:\n%s", want, l.out.String())
		}
	}
	addr := portForwardSvc(t, l.name, "istio-ingress", "svc/httpbin-gateway-istio", "80")
	for path, code := range map[string]string{"/status/418": "418", "/headers": "404"} {
		var got string
		for range 40 {
			b, _ := exec.Command("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5", "-H", "Host:httpbin.example.com", "http://"+addr+path).Output()
			if got = string(b); got == code {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		if got != code {
			t.Errorf("curl -H Host:httpbin.example.com %s%s: %s; want %s", addr, path, got, code)
		}
	}
	// PathPrefix /status matches whole segments: /statusx gets the gateway's own 404,
	// never reaching httpbin (no x-envoy-upstream-service-time).
	hdr, _ := exec.Command("curl", "-s", "-I", "--max-time", "5", "-H", "Host:httpbin.example.com", "http://"+addr+"/statusx").Output()
	if !strings.HasPrefix(string(hdr), "HTTP/1.1 404") || strings.Contains(string(hdr), "x-envoy-upstream-service-time") {
		t.Errorf("curl -I /statusx:\n%s\nwant the gateway's 404, without an upstream", hdr)
	}
	if hdr, _ := exec.Command("curl", "-s", "-I", "--max-time", "5", "-H", "Host:httpbin.example.com", "http://"+addr+"/status/200").Output(); !strings.Contains(string(hdr), "x-envoy-upstream-service-time") {
		t.Errorf("curl -I /status/200:\n%s\nwant an answer from upstream (x-envoy-upstream-service-time)", hdr)
	}
	// Another Host matches the listener's *.example.com but no route: 404.
	b, _ := exec.Command("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5", "-H", "Host:other.example.com", "http://"+addr+"/status/200").Output()
	if string(b) != "404" {
		t.Errorf("curl -H Host:other.example.com /status/200: %s; want 404", b)
	}
}
