package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// productpageViewer is the AuthorizationPolicy of istio.io's ambient Getting Started
// (enforce-auth-policies), as the page writes it: attached to productpage's Service, it
// allows GET from curl's identity only, so the namespace's waypoint enforces it at L7.
const productpageViewer = `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: productpage-viewer
  namespace: default
spec:
  targetRefs:
  - kind: Service
    group: ""
    name: productpage
  action: ALLOW
  rules:
  - from:
    - source:
        principals:
        - cluster.local/ns/default/sa/curl
    to:
    - operation:
        methods: ["GET"]
`

// notcurl is the page's other client: curl.yaml's Deployment under another name and
// service account (the module's samples/curl has no notcurl.yaml).
const notcurl = `apiVersion: v1
kind: ServiceAccount
metadata:
  name: notcurl
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: notcurl
spec:
  replicas: 1
  selector:
    matchLabels:
      app: notcurl
  template:
    metadata:
      labels:
        app: notcurl
    spec:
      terminationGracePeriodSeconds: 0
      serviceAccountName: notcurl
      containers:
      - name: notcurl
        image: docker.io/curlimages/curl:8.16.0
        command: ["/bin/sleep", "infinity"]
        imagePullPolicy: IfNotPresent
`

// TestAmbientGettingStartedL7 walks the L7 part of istio.io's ambient Getting Started on
// Istio's own sample files, unchanged, each command changed only from kubectl/istioctl to
// meshlab: Bookinfo and curl in the ambient default namespace, `waypoint apply
// --enroll-namespace --wait`, the page's productpage-viewer policy (DELETE from curl and
// GET from notcurl get the waypoint's "RBAC: access denied", GET from curl the page), then
// manage-traffic: bookinfo-versions.yaml and route-reviews-90-10.yaml, and the page's 100
// requests split about 90/10 between reviews-v1 and reviews-v2.
func TestAmbientGettingStartedL7(t *testing.T) {
	tl, samples := startAmbientBookinfo(t)
	l, run, poll, step := tl.runningLab, tl.run, tl.poll, tl.step
	const page = "http://productpage:9080/productpage"
	title := "<title>Simple Bookstore App</title>"
	denied := func(out string) bool { return strings.Contains(out, "RBAC: access denied") }

	// Ready when productpage serves its page: it calls details and reviews on a new
	// connection each time, as the sample does, so the calls it makes now (no waypoint
	// yet) leave nothing behind that would bypass the waypoint later.
	poll("productpage's page", func(out string) bool { return strings.Contains(out, title) },
		"exec", "deploy/curl", "--", "curl", "-sS", "--max-time", "10", page)
	step("productpage answers through ztunnel")

	// The page: istioctl waypoint apply --enroll-namespace --wait.
	out := run("waypoint", "apply", "--enroll-namespace", "--wait")
	t.Logf("waypoint apply: %s", strings.TrimSpace(out))
	step("waypoint ready")

	applyYAML(t, l.name, productpageViewer)
	poll("DELETE from curl denied by the waypoint", denied,
		"exec", "deploy/curl", "--", "curl", "-s", "--max-time", "10", page, "-X", "DELETE")
	step("DELETE denied")
	applyYAML(t, l.name, notcurl)
	poll("GET from notcurl denied by the waypoint", denied,
		"exec", "deploy/notcurl", "--", "curl", "-s", "--max-time", "10", page)
	step("notcurl denied")
	poll("GET from curl allowed", func(out string) bool { return strings.Contains(out, title) },
		"exec", "deploy/curl", "--", "curl", "-s", "--max-time", "10", page)
	step("curl's GET allowed")

	// manage-traffic: the version Services, then the HTTPRoute splitting reviews 90/10.
	run("apply", "-f", filepath.Join(samples, "bookinfo/platform/kube/bookinfo-versions.yaml"))
	run("apply", "-f", filepath.Join(samples, "bookinfo/gateway-api/route-reviews-90-10.yaml"))
	// The page runs kubectl exec deploy/curl -- sh -c "for i in $(seq 1 100); do curl -s
	// http://productpage:9080/productpage | grep reviews-v.-; done", grepping the page's
	// "Reviews served by" pod name; meshlab's productpage does not render that line, so
	// each page is counted by its stars instead: none (reviews-v1), black (v2), red (v3).
	// Until the route reaches the waypoint v3 answers too: wait for a round without it.
	loop := `for i in $(seq 1 100); do p=$(curl -s --max-time 10 ` + page + `); case "$p" in ` +
		`*"Ratings service is currently unavailable"*) echo noratings;; *unavailable*) echo err;; *'color="black"'*) echo v2;; *'color="red"'*) echo v3;; ` +
		`*'Simple Bookstore App'*) echo v1;; *) echo err;; esac; done`
	var counts map[string]int
	deadline := time.Now().Add(40 * time.Second)
	for {
		out := run("exec", "deploy/curl", "--", "sh", "-c", loop)
		counts = map[string]int{}
		for _, v := range strings.Fields(out) {
			counts[v]++
		}
		if counts["v3"] == 0 && counts["v1"]+counts["v2"] == 100 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("100 pages under route-reviews-90-10 showed %v; want only reviews-v1 and -v2, 100 in all", counts)
		}
	}
	step("100 pages counted")
	t.Logf("reviews under route-reviews-90-10: %v", counts)
	// 100 pages at 90/10: v1 outside [75, 99] happens with p < 1e-4.
	if counts["v1"] < 75 || counts["v1"] > 99 {
		t.Errorf("route-reviews-90-10: reviews-v1 served %d of 100, v2 %d; want about 90/10", counts["v1"], counts["v2"])
	}
}
