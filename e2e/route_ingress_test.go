package e2e

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// docsKubeIngress is the Kubernetes Ingress page's Ingress (istio.io
// tasks/traffic-management/ingress/kubernetes-ingress), as it writes it.
const docsKubeIngress = `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  annotations:
    kubernetes.io/ingress.class: istio
  name: ingress
spec:
  rules:
  - host: httpbin.example.com
    http:
      paths:
      - path: /status
        pathType: Prefix
        backend:
          service:
            name: httpbin
            port:
              number: 8000
`

// docsKubeIngressClass is the page's IngressClass example: an IngressClass of Istio's
// controller and the page's Ingress naming it instead of the annotation, its path "/".
var docsKubeIngressClass = `apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: istio
spec:
  controller: istio.io/ingress-controller
---
` + strings.NewReplacer("  annotations:\n    kubernetes.io/ingress.class: istio\n", "", "spec:\n", "spec:\n  ingressClassName: istio\n", "path: /status", "path: /").Replace(docsKubeIngress)

// httpbinTask starts a lab at the Ingress Gateways page's Before you begin, which the
// gateway pages share: Istio installed with profile, namespace default labelled for
// injection, Istio's httpbin sample applied. It returns the lab and Istio's samples.
func httpbinTask(t *testing.T, profile string) (*docsLab, string) {
	t.Helper()
	requireHostTool(t, "curl")
	samples := testutil.IstioSamples(t)
	d := startDocsLab(t)
	d.run("install", "--set", "profile="+profile, "-y")
	d.says("namespace/default labeled\n", "", "label", "namespace", "default", "istio-injection=enabled", "--overwrite")
	d.says("serviceaccount/httpbin created\nservice/httpbin created\ndeployment.apps/httpbin created\n", "",
		"apply", "-f", filepath.Join(samples, "httpbin/httpbin.yaml"))
	return d, samples
}

// httpbinHead returns the gateway pages' `curl -s -I -HHost:httpbin.example.com
// "http://$INGRESS_HOST:$INGRESS_PORT<path>"`, run outside the cluster, for a path.
func (d *docsLab) httpbinHead(host, port string) func(path string) func() string {
	return func(path string) func() string {
		return func() string {
			out, _ := d.outside("curl", "-s", "-I", "-HHost:httpbin.example.com", "http://"+host+":"+port+path)
			return out
		}
	}
}

// statusAndHeaders runs the gateway pages' two curls: /status/200 until it prints the
// pages' output (200, server: istio-envoy), then /headers, which is not routed (404).
func (d *docsLab) statusAndHeaders(host, port string) {
	d.t.Helper()
	head := d.httpbinHead(host, port)
	d.until("curl -s -I -HHost:httpbin.example.com http://$INGRESS_HOST:$INGRESS_PORT/status/200 prints the page's output", head("/status/200"),
		func(out string) bool { return elided(out, "HTTP/1.1 200 OK\nserver: istio-envoy\n...") })
	if out := head("/headers")(); !elided(out, "HTTP/1.1 404 Not Found\n...") {
		d.t.Errorf("curl -s -I -HHost:httpbin.example.com http://$INGRESS_HOST:$INGRESS_PORT/headers:\n%s\nwant the page's HTTP/1.1 404 Not Found", out)
	}
}

// TestRouteKubernetesIngressTask walks istio.io's "Kubernetes Ingress": the Ingress
// Gateways page's Before you begin (Istio, httpbin), the page's Ingress with the kubernetes.io/ingress.class
// annotation, INGRESS_HOST and INGRESS_PORT from the ingress gateway Service, its two curls from outside the cluster (200 with server: istio-envoy for
// /status/200, 404 for /headers), `get ingress` as kubectl prints it (the address
// istiod writes: the ingress gateway's), the IngressClass form (path /, so /headers
// answers), and the page's cleanup.
func TestRouteKubernetesIngressTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	d, samples := httpbinTask(t, "default")

	// Before you begin: INGRESS_HOST and INGRESS_PORT, read where the page reads them,
	// from the ingress gateway the install made.
	host := d.kubectl("", "-n", "istio-system", "get", "service", "istio-ingressgateway", "-o", "jsonpath={.status.loadBalancer.ingress[0].ip}")
	port := d.kubectl("", "-n", "istio-system", "get", "service", "istio-ingressgateway", "-o", `jsonpath={.spec.ports[?(@.name=="http2")].port}`)
	if !regexp.MustCompile(`^\d+\.\d+\.\d+\.\d+$`).MatchString(host) || port != "80" {
		t.Fatalf("INGRESS_HOST=%q INGRESS_PORT=%q; want the gateway's address and 80", host, port)
	}
	// Configuring ingress using an Ingress resource.
	d.says("ingress.networking.k8s.io/ingress created\n", docsKubeIngress, "apply", "-f", "-")
	head := d.httpbinHead(host, port)
	d.statusAndHeaders(host, port)
	row := func(class string) *regexp.Regexp {
		return regexp.MustCompile(`^NAME\s+CLASS\s+HOSTS\s+ADDRESS\s+PORTS\s+AGE\ningress\s+` + regexp.QuoteMeta(class) + `\s+httpbin\.example\.com\s+` + regexp.QuoteMeta(host) + `\s+80\s+\d+s\n$`)
	}
	if out := d.kubectl("", "get", "ingress"); !row("<none>").MatchString(out) {
		t.Errorf("get ingress:\n%s\nwant kubectl's columns, CLASS <none>, the ingress gateway's ADDRESS %s, PORTS 80", out, host)
	}

	// Specifying IngressClass: the page's IngressClass and Ingress (path /).
	d.says("ingressclass.networking.k8s.io/istio created\ningress.networking.k8s.io/ingress configured\n", docsKubeIngressClass, "apply", "-f", "-")
	d.until("the IngressClass form's path / routes /headers", head("/headers"), func(out string) bool { return elided(out, "HTTP/1.1 200 OK\nserver: istio-envoy\n...") })
	if out := d.kubectl("", "get", "ingress"); !row("istio").MatchString(out) {
		t.Errorf("get ingress:\n%s\nwant CLASS istio", out)
	}
	if out := d.kubectl("", "get", "ingressclass"); !regexp.MustCompile(`^NAME\s+CONTROLLER\s+PARAMETERS\s+AGE\nistio\s+istio\.io/ingress-controller\s+<none>\s+\d+s\n$`).MatchString(out) {
		t.Errorf("get ingressclass:\n%s\nwant kubectl's columns", out)
	}

	// Cleanup.
	d.says("ingress.networking.k8s.io \"ingress\" deleted\n", "", "delete", "ingress", "ingress")
	// The ingress gateway stays, as a cluster's: with no Gateway left, istiod gives it
	// no listener, so port 80 refuses the connection (curl -s -I prints nothing).
	d.until("deleting the Ingress removes its routes", head("/status/200"), func(out string) bool { return !strings.Contains(out, "200 OK") })
	if out := d.kubectl("", "-n", "istio-system", "get", "service", "istio-ingressgateway", "-o", "jsonpath={.status.loadBalancer.ingress[0].ip}"); out != host {
		t.Errorf("the ingress gateway's Service after the Ingress went: address %q, want it still at %s", out, host)
	}
	d.says("serviceaccount \"httpbin\" deleted\nservice \"httpbin\" deleted\ndeployment.apps \"httpbin\" deleted\n", "",
		"delete", "--ignore-not-found=true", "-f", filepath.Join(samples, "httpbin/httpbin.yaml"))
	if !strings.Contains(d.kubectl("", "get", "ingressclass"), "istio") {
		t.Errorf("the IngressClass went with the Ingress; the page leaves it")
	}
}
