package e2e

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestAmbientGettingStartedIstioSamples walks the L4 part of istio.io's ambient Getting
// Started on Istio's own sample files from the module cache, unchanged (bookinfo.yaml,
// curl.yaml), each command changed only from kubectl/istioctl to meshlab: apply Bookinfo
// and curl, label the namespace istio.io/dataplane-mode=ambient (the page's "namespace/
// default labeled"), the product page through ztunnel, `ztunnel-config workloads` listing
// every pod with PROTOCOL HBONE on the lab's node, `services`, `certificates` with a leaf
// per service account, ztunnel's log with the HBONE tunnel, then the page's
// productpage-ztunnel policy in `policies` and curl exiting with 56. Not walked: the
// ingress gateway (the Gateway API part) and waypoints (L7, issue 27). The lab starts
// with the default namespace declared without labels, as a cluster's is: a lab's
// undeclared namespace injects sidecars by meshlab's own default.
func TestAmbientGettingStartedIstioSamples(t *testing.T) {
	testutil.RequireRoot(t)
	requireZtunnel(t)
	t.Parallel()
	samples := testutil.IstioSamples(t)
	tl := startTaskLabFrom(t, ambientClusterYAML)
	l, run, poll, step := tl.runningLab, tl.run, tl.poll, tl.step

	run("apply", "-f", filepath.Join(samples, "bookinfo/platform/kube/bookinfo.yaml"))
	step("bookinfo applied")
	run("apply", "-f", filepath.Join(samples, "curl/curl.yaml"))
	if out := run("label", "namespace", "default", "istio.io/dataplane-mode=ambient"); out != "namespace/default labeled\n" {
		t.Errorf("label namespace default: %q, want the page's namespace/default labeled", out)
	}
	step("namespace labelled")
	title := regexp.MustCompile(`<title>.*</title>`)
	poll("the product page's title", func(out string) bool { return title.FindString(out) == "<title>Simple Bookstore App</title>" },
		"exec", "deploy/curl", "--", "curl", "-sS", "--max-time", "10", "http://productpage:9080/productpage")

	step("the product page answered")
	// Every pod is a workload of ztunnel's with protocol HBONE on the lab's node.
	pods := []string{"curl-", "details-v1-", "productpage-v1-", "ratings-v1-", "reviews-v1-", "reviews-v2-", "reviews-v3-"}
	workloads := poll("every pod with protocol HBONE", func(out string) bool {
		n := 0
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) == 6 && f[0] == "default" && f[3] == "ml-"+l.name+"-node" && f[4] == "None" && f[5] == "HBONE" {
				n++
			}
		}
		return n == len(pods)
	}, "ztunnel-config", "workloads")
	if !strings.HasPrefix(workloads, "NAMESPACE POD NAME") || !strings.Contains(strings.SplitN(workloads, "\n", 2)[0], "PROTOCOL") {
		t.Errorf("zc workloads header:\n%s\nwant istioctl's NAMESPACE POD NAME ADDRESS NODE WAYPOINT PROTOCOL", workloads)
	}
	for _, p := range pods {
		if !strings.Contains(workloads, "default   "+p) {
			t.Errorf("zc workloads lacks a pod %s*:\n%s", p, workloads)
		}
	}
	services := run("zc", "services")
	for _, s := range []string{"curl", "details", "productpage", "ratings", "reviews"} {
		if !regexp.MustCompile(`(?m)^default\s+` + s + `\s+10\.\S+\s+None\s+\d+/\d+$`).MatchString(services) {
			t.Errorf("zc services lacks %s with a VIP and its endpoints:\n%s", s, services)
		}
	}
	certs := poll("a leaf certificate per service account", func(out string) bool {
		for _, sa := range []string{"curl", "bookinfo-productpage", "bookinfo-details", "bookinfo-reviews", "bookinfo-ratings"} {
			if !regexp.MustCompile(`(?m)^spiffe://cluster\.local/ns/default/sa/` + sa + `\s+Leaf\s+Available\s+true`).MatchString(out) {
				return false
			}
		}
		return true
	}, "zc", "certificates")
	if !strings.Contains(certs, "Root") {
		t.Errorf("zc certificates shows no root:\n%s", certs)
	}
	poll("a connection complete line tunnelled to productpage's 15008", func(out string) bool {
		return regexp.MustCompile(`connection complete\t.*dst\.addr=\S+:15008 dst\.hbone_addr=\S+:9080 .*dst\.workload="productpage-v1-`).MatchString(out)
	}, "logs", "ds/ztunnel", "-n", "istio-system")

	step("ztunnel-config and log seen")
	applyYAML(t, l.name, productpageZtunnelPolicy)
	poll("the policy, ALLOW, scoped to the workload selector", func(out string) bool {
		return regexp.MustCompile(`(?m)^default\s+productpage-ztunnel\s+Allow\s+WorkloadSelector$`).MatchString(out)
	}, "zc", "policies")
	curlUntilExit(t, l.name, 56, 20*time.Second, "curl under the L4 policy (the page's 56, reset by ztunnel)", "-s", "http://productpage:9080/productpage")
}
