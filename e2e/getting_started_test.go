package e2e

import (
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestGettingStartedSidecarTask walks istio.io's Getting Started (sidecar mode) as the
// page writes it, on Istio's own sample files from the module cache, each command
// changed only from kubectl to meshlab, and compares the outputs with the page's:
// namespace/default labeled; apply's `service/details created`,
// `deployment.apps/details-v1 created` lines; `get services` with the kubernetes Service
// and kubectl's columns; `get pods` 2/2 Running; the product page's title from the
// ratings pod; the Gateway API gateway, annotated ClusterIP, in `get gateway` as
// NAME CLASS ADDRESS PROGRAMMED AGE with its hostname; the page through it. The first
// step, `istioctl install -f samples/bookinfo/demo-profile-no-gateways.yaml -y`, prints
// istioctl's lines (a lab has its control plane from the start).
func TestGettingStartedSidecarTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	samples := testutil.IstioSamples(t)
	l, run := startTaskLab(t)
	table := func(out string) [][]string {
		var rows [][]string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			rows = append(rows, regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1))
		}
		return rows
	}

	if out := run("install", "-f", filepath.Join(samples, "bookinfo/demo-profile-no-gateways.yaml"), "-y"); out != "✔ Istio core installed ⛵️\n✔ Istiod installed 🧠\n✔ Installation complete\nMade this installation the default for injection and validation.\n" {
		t.Errorf("install -f demo-profile-no-gateways.yaml -y:\n%s", out)
	}
	if out := run("label", "namespace", "default", "istio-injection=enabled"); out != "namespace/default labeled\n" {
		t.Errorf("label namespace default: %q", out)
	}
	run("get", "crd", "gateways.gateway.networking.k8s.io")

	out := run("apply", "-f", filepath.Join(samples, "bookinfo/platform/kube/bookinfo.yaml"))
	for _, want := range []string{"service/details created", "serviceaccount/bookinfo-details created", "deployment.apps/details-v1 created",
		"deployment.apps/reviews-v3 created", "service/productpage created", "deployment.apps/productpage-v1 created"} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("apply bookinfo.yaml:\n%s\nwant the line %q", out, want)
		}
	}

	svcs := table(run("get", "services"))
	if strings.Join(svcs[0], " ") != "NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE" || len(svcs) != 6 {
		t.Fatalf("get services:\n%v\nwant kubectl's columns and details, kubernetes, productpage, ratings, reviews", svcs)
	}
	for i, name := range []string{"details", "kubernetes", "productpage", "ratings", "reviews"} {
		row := svcs[i+1]
		port := "9080/TCP"
		if name == "kubernetes" {
			port = "443/TCP"
		}
		if row[0] != name || row[1] != "ClusterIP" || row[3] != "<none>" || row[4] != port {
			t.Errorf("get services row %v; want %s ClusterIP <ip> <none> %s <age>", row, name, port)
		}
	}

	deadline := time.Now().Add(60 * time.Second)
	for {
		pods := table(run("get", "pods"))
		ready := 0
		for _, r := range pods[1:] {
			if len(r) == 5 && r[1] == "2/2" && r[2] == "Running" && r[3] == "0" {
				ready++
			}
		}
		if strings.Join(pods[0], " ") == "NAME READY STATUS RESTARTS AGE" && len(pods) == 7 && ready == 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("get pods:\n%v\nwant kubectl's columns and Bookinfo's 6 pods 2/2 Running", pods)
		}
		time.Sleep(time.Second)
	}

	ratings := strings.TrimSpace(run("get", "pod", "-l", "app=ratings", "-o", "jsonpath={.items[0].metadata.name}"))
	page := run("exec", ratings, "-c", "ratings", "--", "curl", "-sS", "productpage:9080/productpage")
	if title := regexp.MustCompile(`<title>.*</title>`).FindString(page); title != "<title>Simple Bookstore App</title>" {
		t.Fatalf("the product page's title %q; want <title>Simple Bookstore App</title>:\n%s", title, page)
	}

	out = run("apply", "-f", filepath.Join(samples, "bookinfo/gateway-api/bookinfo-gateway.yaml"))
	for _, want := range []string{"gateway.gateway.networking.k8s.io/bookinfo-gateway created", "httproute.gateway.networking.k8s.io/bookinfo created"} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("apply bookinfo-gateway.yaml:\n%s\nwant the line %q", out, want)
		}
	}
	if out := run("annotate", "gateway", "bookinfo-gateway", "networking.istio.io/service-type=ClusterIP", "--namespace=default"); out != "gateway.gateway.networking.k8s.io/bookinfo-gateway annotated\n" {
		t.Errorf("annotate gateway: %q", out)
	}
	deadline = time.Now().Add(60 * time.Second)
	for {
		gw := table(run("get", "gateway"))
		if len(gw) == 2 && strings.Join(gw[0], " ") == "NAME CLASS ADDRESS PROGRAMMED AGE" && len(gw[1]) == 5 &&
			gw[1][0] == "bookinfo-gateway" && gw[1][1] == "istio" && gw[1][2] == "bookinfo-gateway-istio.default.svc.cluster.local" && gw[1][3] == "True" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("get gateway:\n%v\nwant bookinfo-gateway istio bookinfo-gateway-istio.default.svc.cluster.local True <age>", gw)
		}
		time.Sleep(time.Second)
	}
	// kubectl port-forward svc/bookinfo-gateway-istio 8080:80, then the browser: from the
	// host, the gateway's answer is the last proxy's (server: istio-envoy); a pod's
	// sidecar would rewrite it to envoy on the way back.
	addr := portForwardSvc(t, l.name, "default", "svc/bookinfo-gateway-istio", "80")
	resp, err := http.Get("http://" + addr + "/productpage")
	if err != nil {
		t.Fatalf("GET /productpage through port-forward %s: %v", addr, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "<title>Simple Bookstore App</title>") || resp.Header.Get("Server") != "istio-envoy" {
		t.Errorf("the product page through the gateway: %d, server %q\n%s\nwant 200, its title, server: istio-envoy", resp.StatusCode, resp.Header.Get("Server"), body)
	}
}
