package e2e

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The manifests of istio.io's ambient "Use Layer 7 features" page (ambient/usage/
// l7-features), as the page writes them.
const (
	// waypointViewer attaches to the namespace's waypoint (targetRefs Gateway): GET only,
	// from the default and istio-system namespaces.
	waypointViewer = `apiVersion: security.istio.io/v1beta1
kind: AuthorizationPolicy
metadata:
  name: viewer
  namespace: default
spec:
  targetRefs:
  - kind: Gateway
    group: gateway.networking.k8s.io
    name: waypoint
  action: ALLOW
  rules:
  - from:
    - source:
        namespaces: ["default", "istio-system"]
    to:
    - operation:
        methods: ["GET"]
`
	// reviewsServiceRoute attaches to the reviews Service (parentRefs Service): 90/10
	// between reviews-v1 and reviews-v2.
	reviewsServiceRoute = `apiVersion: gateway.networking.k8s.io/v1beta1
kind: HTTPRoute
metadata:
  name: reviews
spec:
  parentRefs:
  - group: ""
    kind: Service
    name: reviews
    port: 9080
  rules:
  - backendRefs:
    - name: reviews-v1
      port: 9080
      weight: 90
    - name: reviews-v2
      port: 9080
      weight: 10
`
	// reviewsV2Viewer is not the page's: it attaches to reviews-v2-pod-waypoint and lets
	// only GET through, so a request to reviews-v2's pod IP shows that the waypoint is in
	// its path.
	reviewsV2Viewer = `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: reviews-v2-viewer
  namespace: default
spec:
  targetRefs:
  - kind: Gateway
    group: gateway.networking.k8s.io
    name: reviews-v2-pod-waypoint
  action: ALLOW
  rules:
  - to:
    - operation:
        methods: ["GET"]
`
	// pageGateway is the page's "deploy the generated Gateway resource" manifest: it
	// has no apiVersion (the page trims istioctl's first line), which kubectl refuses.
	pageGateway = `kind: Gateway
metadata:
  labels:
    istio.io/waypoint-for: service
  name: waypoint
  namespace: default
spec:
  gatewayClassName: istio-waypoint
  listeners:
  - name: mesh
    port: 15008
    protocol: HBONE
`
)

// TestDocsAmbientWaypointPage walks istio.io's ambient "Configure waypoint proxies" page
// (ambient/usage/waypoint) and the targeting part of "Use Layer 7 features"
// (ambient/usage/l7-features) on Getting Started's Bookinfo and curl from Istio's samples,
// each command changed only from kubectl/istioctl to meshlab, outputs compared with the
// page's: the Gateway API CRD check, `get ns -L istio.io/dataplane-mode`, `waypoint
// generate --for service` (the page's output is part of istioctl's, as its test.sh checks),
// `waypoint apply` (istioctl prints "✅ " before the page's lines), `--enroll-namespace`,
// `label ns` (kubectl's "not labeled" after the enrolment set it), the L7 page's viewer
// policy on the waypoint (GET served, DELETE "RBAC: access denied") and its HTTPRoute on
// the reviews Service (Accepted), a waypoint for the reviews Service and one `--for
// workload` with `label pod -l` (kubectl's "pod/NAME labeled"), `ztunnel-config services`
// and `workloads` and REVIEWS_V2_POD_IP as the page's debugging steps show them, the
// request to that pod IP (through reviews-v2-pod-waypoint: a GET-only policy on that
// waypoint denies DELETE), and the page's clean-up.
func TestDocsAmbientWaypointPage(t *testing.T) {
	// Where the page starts: Getting Started's Bookinfo and curl in the ambient mesh.
	tl, samples := startAmbientBookinfo(t)
	l, run, poll, step := tl.runningLab, tl.run, tl.poll, tl.step
	const page = "http://productpage:9080/productpage"
	title := "<title>Simple Bookstore App</title>"
	run("apply", "-f", filepath.Join(samples, "bookinfo/platform/kube/bookinfo-versions.yaml"))

	// The Gateway API CRDs are there, so the page's kustomize line is skipped.
	if out := run("get", "crd", "gateways.gateway.networking.k8s.io"); !strings.Contains(out, "gateways.gateway.networking.k8s.io") {
		t.Errorf("get crd gateways.gateway.networking.k8s.io:\n%s", out)
	}
	nsOut := run("get", "ns", "-L", "istio.io/dataplane-mode")
	for _, re := range []string{`^NAME\s+STATUS\s+AGE\s+DATAPLANE-MODE\n`, `(?m)^istio-system\s+Active\s+\S+\s*$`, `(?m)^default\s+Active\s+\S+\s+ambient$`} {
		if !regexp.MustCompile(re).MatchString(nsOut) {
			t.Errorf("get ns -L istio.io/dataplane-mode:\n%s\nwant the page's lines (%s)", nsOut, re)
		}
	}
	const generated = "kind: Gateway\nmetadata:\n  labels:\n    istio.io/waypoint-for: service\n  name: waypoint\n  namespace: default\n" +
		"spec:\n  gatewayClassName: istio-waypoint\n  listeners:\n  - name: mesh\n    port: 15008\n    protocol: HBONE\n"
	if out := run("waypoint", "generate", "--for", "service", "-n", "default"); !strings.Contains(out, generated) {
		t.Errorf("waypoint generate --for service -n default:\n%s\nwant it to hold the page's\n%s", out, generated)
	}
	// istioctl prints each line with "✅ ", which the page leaves out.
	pageLines := func(out string) string { return strings.ReplaceAll(out, "✅ ", "") }
	if out := run("waypoint", "apply", "-n", "default"); pageLines(out) != "waypoint default/waypoint applied\n" {
		t.Errorf("waypoint apply -n default: %q, want the page's waypoint default/waypoint applied", out)
	}
	if out, err := meshlab(t, "--lab", l.name, "apply", "-f", writeTemp(t, "gateway.yaml", pageGateway)); err == nil || !strings.Contains(out, "apiVersion") {
		t.Errorf("apply of the page's Gateway without apiVersion: %v\n%s\nwant it refused for its missing apiVersion, as kubectl refuses it", err, out)
	}
	step("waypoint generated and applied")

	out := run("waypoint", "apply", "-n", "default", "--enroll-namespace")
	if want := "waypoint default/waypoint applied\nnamespace default labeled with \"istio.io/use-waypoint: waypoint\"\n"; pageLines(out) != want {
		t.Errorf("waypoint apply --enroll-namespace: %q, want the page's %q", out, want)
	}
	// The page's alternative to --enroll-namespace: after it, the label is there already.
	if out := run("label", "ns", "default", "istio.io/use-waypoint=waypoint"); out != "namespace/default not labeled\n" {
		t.Errorf("label ns default istio.io/use-waypoint=waypoint after the enrolment: %q, want kubectl's namespace/default not labeled", out)
	}

	// l7-features: the viewer policy on the whole waypoint.
	applyYAML(t, l.name, waypointViewer)
	poll("DELETE denied by the waypoint's viewer policy", func(out string) bool { return strings.Contains(out, "RBAC: access denied") },
		"exec", "deploy/curl", "--", "curl", "-s", "--max-time", "10", page, "-X", "DELETE")
	poll("GET served through the waypoint", func(out string) bool { return strings.Contains(out, title) },
		"exec", "deploy/curl", "--", "curl", "-s", "--max-time", "10", page)
	step("the viewer policy enforced by the waypoint")
	applyYAML(t, l.name, reviewsServiceRoute)
	poll("the reviews HTTPRoute accepted on the reviews Service", func(out string) bool {
		return strings.Contains(out, `"kind":"Service","name":"reviews"`) && strings.Contains(out, `"reason":"Accepted","status":"True"`)
	}, "get", "httproute", "reviews", "-o", "jsonpath={.status}")

	// A waypoint for the reviews Service, and one for a pod.
	if out := run("waypoint", "apply", "-n", "default", "--name", "reviews-svc-waypoint"); pageLines(out) != "waypoint default/reviews-svc-waypoint applied\n" {
		t.Errorf("waypoint apply --name reviews-svc-waypoint: %q", out)
	}
	if out := run("label", "service", "reviews", "istio.io/use-waypoint=reviews-svc-waypoint"); out != "service/reviews labeled\n" {
		t.Errorf("label service reviews: %q, want the page's service/reviews labeled", out)
	}
	if out := run("waypoint", "apply", "-n", "default", "--name", "reviews-v2-pod-waypoint", "--for", "workload"); pageLines(out) != "waypoint default/reviews-v2-pod-waypoint applied\n" {
		t.Errorf("waypoint apply --name reviews-v2-pod-waypoint --for workload: %q", out)
	}
	// The page's debugging step: reviews uses reviews-svc-waypoint, the namespace's other
	// services the namespace's waypoint.
	services := poll("reviews on reviews-svc-waypoint, the others on waypoint", func(out string) bool {
		return regexp.MustCompile(`(?m)^default\s+reviews\s+\S+\s+reviews-svc-waypoint\s`).MatchString(out) &&
			regexp.MustCompile(`(?m)^default\s+productpage\s+\S+\s+waypoint\s`).MatchString(out)
	}, "ztunnel-config", "services")
	for _, s := range []string{"details", "ratings", "curl"} {
		if !regexp.MustCompile(`(?m)^default\s+` + s + `\s+\S+\s+waypoint\s`).MatchString(services) {
			t.Errorf("ztunnel-config services: %s does not use the namespace's waypoint:\n%s", s, services)
		}
	}
	if out := run("waypoint", "list"); !regexp.MustCompile(`(?m)^reviews-v2-pod-waypoint\s+default\s+workload\s+(True|False)\s*$`).MatchString(out) {
		t.Errorf("waypoint list: no reviews-v2-pod-waypoint for workload traffic:\n%s", out)
	}
	if out := run("label", "pod", "-l", "version=v2,app=reviews", "istio.io/use-waypoint=reviews-v2-pod-waypoint"); !regexp.MustCompile(`^pod/reviews-v2-\S+ labeled\n$`).MatchString(out) {
		t.Errorf("label pod -l version=v2,app=reviews: %q, want the page's pod/reviews-v2-... labeled", out)
	}
	// The page's debugging step: reviews-v2's pod on its own waypoint, the others on none
	// (the namespace's waypoint is for services).
	workloads := poll("reviews-v2's pod on reviews-v2-pod-waypoint", func(out string) bool {
		return regexp.MustCompile(`(?m)^default\s+reviews-v2-\S+\s+\S+\s+\S+\s+reviews-v2-pod-waypoint\s+HBONE$`).MatchString(out)
	}, "ztunnel-config", "workloads")
	if !regexp.MustCompile(`(?m)^default\s+reviews-v1-\S+\s+\S+\s+\S+\s+None\s+HBONE$`).MatchString(workloads) {
		t.Errorf("ztunnel-config workloads: reviews-v1 should use no waypoint:\n%s", workloads)
	}
	// export REVIEWS_V2_POD_IP=$(kubectl get pod -l version=v2,app=reviews -o jsonpath='{.items[0].status.podIP}')
	// kubectl exec deploy/curl -- curl -s http://$REVIEWS_V2_POD_IP:9080/reviews/1
	// ztunnel sends the pod-addressed request to reviews-v2-pod-waypoint, whose
	// main_internal matches the pod's IP and HTTP (direct-http): a policy on that
	// waypoint decides it.
	ip := run("get", "pod", "-l", "version=v2,app=reviews", "-o", "jsonpath={.items[0].status.podIP}")
	if !strings.HasPrefix(ip, "10.") {
		t.Fatalf("REVIEWS_V2_POD_IP: %q, want reviews-v2's pod IP", ip)
	}
	podURL := "http://" + ip + ":9080/reviews/1"
	poll("reviews-v2's pod answers at its IP through reviews-v2-pod-waypoint", func(out string) bool { return strings.Contains(out, `"podname": "reviews-v2-`) },
		"exec", "deploy/curl", "--", "curl", "-s", "--max-time", "10", podURL)
	applyYAML(t, l.name, reviewsV2Viewer)
	poll("DELETE to reviews-v2's pod IP denied by reviews-v2-pod-waypoint's policy", func(out string) bool { return strings.Contains(out, "RBAC: access denied") },
		"exec", "deploy/curl", "--", "curl", "-s", "--max-time", "10", podURL, "-X", "DELETE")
	poll("GET to reviews-v2's pod IP served with the GET-only policy", func(out string) bool { return strings.Contains(out, `"podname": "reviews-v2-`) },
		"exec", "deploy/curl", "--", "curl", "-s", "--max-time", "10", podURL)
	step("reviews-v2's pod IP through reviews-v2-pod-waypoint")
	poll("the page through reviews-svc-waypoint", func(out string) bool { return strings.Contains(out, title) },
		"exec", "deploy/curl", "--", "curl", "-s", "--max-time", "10", page)
	step("service and workload waypoints")

	// Cleaning up.
	if out := run("waypoint", "delete", "--all", "-n", "default"); strings.Count(out, " deleted\n") != 3 {
		t.Errorf("waypoint delete --all -n default: %q, want the three waypoints deleted", out)
	}
	if out := run("label", "ns", "default", "istio.io/use-waypoint-"); out != "namespace/default unlabeled\n" {
		t.Errorf("label ns default istio.io/use-waypoint-: %q, want kubectl's namespace/default unlabeled", out)
	}
	if out := run("waypoint", "list"); out != "No waypoints found.\n" {
		t.Errorf("waypoint list after the clean-up:\n%s", out)
	}
}
