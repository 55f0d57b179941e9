package e2e

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
	"github.com/meshlab/meshlab/lab/ambient"
)

// TestIstiodAmbientL4 runs the L4 part of Istio's ambient Getting Started with istiod as
// the lab's control plane: the ambient lab (Bookinfo and curl, namespace default labelled
// istio.io/dataplane-mode=ambient) starts istiod with ambient on, the lab's ztunnel gets
// its workloads, services and policies from istiod over the lab's xDS relay (delta ADS,
// WDS), every pod is HBONE on the lab's node in ztunnel-config, curl reaches productpage
// through ztunnel with mutual_tls in ztunnel's metrics, proxy-status shows the ztunnel
// synced on what istiod sent (and, in istiod's own proxy-status, IGNORED for Envoy's
// types), history lists its WDS versions, and the page's L4 policy, fed to istiod, makes
// curl (another service account) fail with exit 56.
func TestIstiodAmbientL4(t *testing.T) {
	l, _, poll := startIstiodAmbientLab(t)
	if !strings.Contains(l.out.String(), "control plane: istiod ") {
		t.Errorf("up did not say istiod is the control plane:\n%s", l.out.String())
	}
	zt := ambient.ZtunnelPodName(l.name)

	// ztunnel holds every pod as istiod sent it: HBONE (the redirection annotation the
	// node agent set, fed to istiod) on the lab's node (the pods' spec.nodeName).
	pods := []string{"curl-", "details-v1-", "productpage-v1-", "ratings-v1-", "reviews-v1-", "reviews-v2-", "reviews-v3-"}
	poll("every pod HBONE on the lab's node in ztunnel-config", allHBONE(l, len(pods)), "ztunnel-config", "workloads")

	poll("the product page through ztunnel", func(out string) bool { return strings.Contains(out, "<title>Simple Bookstore App</title>") },
		"exec", "deploy/curl", "--", "curl", "-s", "--max-time", "10", "http://productpage:9080/productpage")
	fams := scrapeMetrics(t, lab.PathsFor(lab.DefaultRunRoot, l.name).APISocket())
	want := map[string]string{"pod": zt, "reporter": "destination", "connection_security_policy": "mutual_tls", "destination_workload": "productpage-v1"}
	if counterValue(fams["istio_tcp_connections_opened_total"], want) == 0 {
		t.Errorf("ztunnel's metrics have no istio_tcp_connections_opened_total with %v", want)
	}

	// The relay saw the ztunnel ACK what istiod sent: proxy-status gives its version.
	poll("the ztunnel's acked version in proxy-status", func(out string) bool {
		return regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(zt) + `\.istio-system(\s+IGNORED){4}\s+\S+\s+true$`).MatchString(out)
	}, "proxy-status")
	// istiod's own view (syncz), as istioctl prints it: Envoy's types are IGNORED for a
	// ztunnel, which is never sent them; history takes the ztunnel pod (WDS, WADS).
	poll("the ztunnel in proxy-status --istiod, Envoy's types IGNORED", func(out string) bool {
		return regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(zt) + `\.istio-system\s+Kubernetes(\s+IGNORED){5}\s+meshlab-istiod\s`).MatchString(out)
	}, "proxy-status", "--istiod")
	poll("the ztunnel's history", func(out string) bool {
		return strings.HasPrefix(out, "VERSION") && strings.Contains(strings.SplitN(out, "\n", 2)[0], "WDS") &&
			regexp.MustCompile(`(?m)^\S+\s+\S+\s+ACK/\d+\s`).MatchString(out)
	}, "history", zt+".istio-system")

	applyYAML(t, l.name, productpageZtunnelPolicy)
	poll("istiod's policy in ztunnel-config", func(out string) bool {
		return regexp.MustCompile(`(?m)^default\s+productpage-ztunnel\s+Allow\s+WorkloadSelector$`).MatchString(out)
	}, "zc", "policies")
	curlUntilExit(t, l.name, 56, 45*time.Second, "curl under istiod's L4 policy (reset by ztunnel)", "-s", "http://productpage:9080/productpage")
}

// TestIstiodAmbientWaypointL7 runs the L7 part of the ambient Getting Started with istiod
// as the control plane: `waypoint apply --enroll-namespace --wait` reaches istiod as the
// waypoint's programmed Gateway, istiod configures the waypoint's proxy (relayed by the
// lab; proxy-status shows it synced, nothing refused) and tells ztunnel to send productpage's traffic through it, and the page's
// productpage-viewer policy (targetRefs the Service) makes the waypoint deny curl's
// DELETE with "RBAC: access denied" and let its GET through; the waypoint reports both
// in istio_requests_total (reporter="waypoint").
func TestIstiodAmbientWaypointL7(t *testing.T) {
	l, ml, poll := startIstiodAmbientLab(t)
	const page = "http://productpage:9080/productpage"
	title := "<title>Simple Bookstore App</title>"
	poll("the product page through ztunnel", func(out string) bool { return strings.Contains(out, title) },
		"exec", "deploy/curl", "--", "curl", "-s", "--max-time", "10", page)
	if out, err := ml("waypoint", "apply", "--enroll-namespace", "--wait"); err != nil {
		t.Fatalf("waypoint apply: %v\n%s", err, out)
	}
	poll("productpage's waypoint in ztunnel-config", func(out string) bool {
		return regexp.MustCompile(`(?m)^default\s+productpage\s+\S+\s+waypoint\s`).MatchString(out)
	}, "zc", "services")
	poll("the waypoint's proxy synced on istiod's config, nothing refused", func(out string) bool {
		return regexp.MustCompile(`(?m)^waypoint-\S+\.default\s+SYNCED\s+SYNCED\s`).MatchString(out) && !strings.Contains(out, "NACK")
	}, "proxy-status")
	applyYAML(t, l.name, productpageViewer)
	poll("DELETE from curl denied by the waypoint", func(out string) bool { return strings.Contains(out, "RBAC: access denied") },
		"exec", "deploy/curl", "--", "curl", "-s", "--max-time", "10", page, "-X", "DELETE")
	poll("GET from curl allowed", func(out string) bool { return strings.Contains(out, title) },
		"exec", "deploy/curl", "--", "curl", "-s", "--max-time", "10", page)
	// The mesh config fed to istiod names Istio's default metrics provider, as Istio's
	// chart writes it, so istiod gives the waypoint its istio.stats: the waypoint reports
	// both requests (the denied one was never routed: no destination workload).
	wp, _, _ := ambientPodOf(t, l.name, "waypoint-")
	waitMetric(t, l.name, wp, 15020, "istio_requests_total", map[string]string{"reporter": "waypoint", "response_code": "200",
		"source_workload": "curl", "destination_workload": "productpage-v1", "destination_service_name": "productpage",
		"connection_security_policy": "mutual_tls"}, 1)
	waitMetric(t, l.name, wp, 15020, "istio_requests_total", map[string]string{"reporter": "waypoint", "response_code": "403",
		"source_workload": "curl"}, 1)
}

// startIstiodAmbientLab starts the ambient lab on istiod and returns it with ml, which
// runs meshlab on it (by --lab: waypoint's --name is the waypoint's), and poll, which
// runs ml until ok holds for its output (at most 45 s: a loaded machine) and returns it.
func startIstiodAmbientLab(t *testing.T) (l *runningLab, ml func(args ...string) (string, error), poll func(what string, ok func(string) bool, args ...string) string) {
	t.Helper()
	testutil.RequireRoot(t)
	bin := istiodBin(t)
	requireZtunnel(t)
	t.Parallel()
	l = startLabWithin(t, 3*time.Minute, "ambient", "--control-plane=istiod", "--istiod-path", bin)
	ml, poll = labCommands(t, l)
	return l, ml, poll
}

// allHBONE reports whether `ztunnel-config workloads` shows n pods of default on the
// lab's node, with HBONE.
func allHBONE(l *runningLab, n int) func(out string) bool {
	return func(out string) bool {
		hbone := 0
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) == 6 && f[0] == "default" && f[3] == "ml-"+l.name+"-node" && f[5] == "HBONE" {
				hbone++
			}
		}
		return hbone == n
	}
}

// labCommands returns ml, which runs meshlab on l (by --lab), and poll, which runs ml
// until ok holds for its output (at most 45 s: a loaded machine) and returns it.
func labCommands(t *testing.T, l *runningLab) (ml func(args ...string) (string, error), poll func(what string, ok func(string) bool, args ...string) string) {
	t.Helper()
	ml = func(args ...string) (string, error) {
		return meshlab(t, append([]string{"--lab", l.name}, args...)...)
	}
	poll = func(what string, ok func(string) bool, args ...string) string {
		t.Helper()
		deadline := time.Now().Add(45 * time.Second)
		for {
			out, err := ml(args...)
			if err == nil && ok(out) {
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 45s: %v\n%s", what, err, out)
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	return ml, poll
}

// sideSleep is a sidecar namespace with a sleep pod, beside an ambient lab's Bookinfo.
const sideSleep = `---
apiVersion: v1
kind: Namespace
metadata: {name: side, labels: {istio-injection: enabled}}
---
apiVersion: v1
kind: Pod
metadata: {name: sleep, namespace: side, labels: {app: sleep}}
spec:
  containers: [{name: sleep, image: curlimages/curl, command: ["/bin/sleep", "infinity"]}]
`

// TestIstiodAmbientAfterUp runs Istio's ambient Getting Started in its own order on
// istiod: the lab comes up with Bookinfo and curl in a namespace of no data-plane mode
// (and a sidecar namespace beside it), so istiod starts without ambient; then the
// namespace is labelled istio.io/dataplane-mode=ambient. The lab restarts istiod with
// ambient on and everything it holds, and every proxy reconnects: ztunnel gets every pod
// HBONE, curl reaches productpage through ztunnel, and the sidecar, re-sent its config
// by the new istiod, ACKs a new version and reaches the ambient page.
func TestIstiodAmbientAfterUp(t *testing.T) {
	testutil.RequireRoot(t)
	bin := istiodBin(t)
	requireZtunnel(t)
	t.Parallel()
	scenario, err := os.ReadFile("../scenarios/ambient.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const label = "  labels:\n    istio.io/dataplane-mode: ambient\n"
	if !strings.Contains(string(scenario), label) {
		t.Fatalf("scenarios/ambient.yaml no longer labels its namespace as %q", label)
	}
	plain := strings.Replace(string(scenario), label, "", 1) + sideSleep
	l := startLabWithin(t, 3*time.Minute, writeTemp(t, "bookinfo.yaml", plain), "--control-plane=istiod", "--istiod-path", bin)
	ml, poll := labCommands(t, l)
	sleepSynced := regexp.MustCompile(`(?m)^sleep\.side\s+SYNCED\s+SYNCED\s+SYNCED\s+SYNCED\s+.*$`)
	before := sleepSynced.FindString(poll("the sidecar synced on the first istiod", sleepSynced.MatchString, "proxy-status"))

	start := time.Now()
	if out, err := ml("label", "namespace", "default", "istio.io/dataplane-mode=ambient"); err != nil || out != "namespace/default labeled\n" {
		t.Fatalf("label namespace default: %v: %q", err, out)
	}
	pods := []string{"curl-", "details-v1-", "productpage-v1-", "ratings-v1-", "reviews-v1-", "reviews-v2-", "reviews-v3-"}
	poll("every pod HBONE on the lab's node in ztunnel-config", allHBONE(l, len(pods)), "ztunnel-config", "workloads")
	const page, title = "http://productpage:9080/productpage", "<title>Simple Bookstore App</title>"
	poll("the product page through ztunnel", func(out string) bool { return strings.Contains(out, title) },
		"exec", "deploy/curl", "--", "curl", "-s", "--max-time", "10", page)
	t.Logf("ambient on istiod %s after the label", time.Since(start).Round(time.Millisecond))
	fams := scrapeMetrics(t, lab.PathsFor(lab.DefaultRunRoot, l.name).APISocket())
	want := map[string]string{"pod": ambient.ZtunnelPodName(l.name), "reporter": "destination", "destination_workload": "productpage-v1"}
	if counterValue(fams["istio_tcp_connections_opened_total"], want) == 0 {
		t.Errorf("ztunnel's metrics have no istio_tcp_connections_opened_total with %v", want)
	}

	// The sidecar reconnected to the new istiod and ACKed what it sent (a new version),
	// and reaches the ambient page.
	poll("the sidecar synced on the restarted istiod", func(out string) bool {
		now := sleepSynced.FindString(out)
		return now != "" && now != before
	}, "proxy-status")
	poll("the product page from the sidecar", func(out string) bool { return strings.Contains(out, title) },
		"exec", "-n", "side", "sleep", "--", "curl", "-s", "--max-time", "10", "http://productpage.default:9080/productpage")
	if !strings.Contains(l.out.String(), "istiod restarted") {
		t.Errorf("the lab's log does not say istiod was restarted:\n%s", l.out.String())
	}
}
