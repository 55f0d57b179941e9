package e2e

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// parityLua is the Lua script of istio.io's "Extend waypoints with Lua scripts" page
// (ambient/usage/extend-waypoint-lua), the same in its three TrafficExtensions.
const parityLua = `    inlineCode: |
      function envoy_on_request(request_handle)
        local number = tonumber(request_handle:headers():get("x-number"))
        if number == nil then return end
        local parity = number % 2 == 0 and "even" or "odd"
        request_handle:streamInfo():dynamicMetadata():set(
          "envoy.filters.http.lua", "parity", parity)
      end
      function envoy_on_response(response_handle)
        local meta = response_handle:streamInfo():dynamicMetadata():get(
          "envoy.filters.http.lua")
        if meta == nil then return end
        response_handle:headers():add("x-parity", meta["parity"])
      end
`

// The page's TrafficExtensions, as it writes them.
const (
	parityAtGateway = `apiVersion: extensions.istio.io/v1alpha1
kind: TrafficExtension
metadata:
  name: parity-at-gateway
spec:
  targetRefs:
    - kind: Gateway
      group: gateway.networking.k8s.io
      name: bookinfo-gateway
  phase: STATS
  lua:
` + parityLua
	parityAtWaypoint = `apiVersion: extensions.istio.io/v1alpha1
kind: TrafficExtension
metadata:
  name: parity-at-waypoint
spec:
  targetRefs:
    - kind: Gateway
      group: gateway.networking.k8s.io
      name: waypoint
  phase: STATS
  lua:
` + parityLua
	parityForReviews = `apiVersion: extensions.istio.io/v1alpha1
kind: TrafficExtension
metadata:
  name: parity-for-reviews
spec:
  targetRefs:
    - kind: Service
      group: ""
      name: reviews
  match:
  - mode: SERVER
  phase: STATS
  lua:
` + parityLua
)

// parityLine is `| grep x-parity` of curl's -D - output (its lines end in CR LF).
func parityLine(out string) string { return strings.TrimSpace(grepLines(out, "x-parity")) }

// TestDocsAmbientLuaPage walks istio.io's "Extend waypoints with Lua scripts" page
// (ambient/usage/extend-waypoint-lua) on Getting Started's Bookinfo (its Gateway API
// bookinfo-gateway annotated ClusterIP, as the page's test.sh does) and curl, each
// command changed only from kubectl/istioctl to meshlab, outputs compared with the
// page's where it prints them: `get gateway` (like: the AGE differs), the parity filter
// at the gateway (x-number 4 gives x-parity: even), `waypoint apply --enroll-namespace
// --wait`, productpage through the waypoint (200), `get gateway` with the waypoint, the
// filter on the whole waypoint (x-number 7: odd), then, once that one is deleted, on the
// reviews Service's chain only (reviews: odd for 3; productpage: none), and the page's
// clean-up `delete trafficextension` of the three names. Not the page's: a script
// calling a handle method the proxy does not implement fails as Envoy's script error
// (logged, the request goes on).
func TestDocsAmbientLuaPage(t *testing.T) {
	tl, samples := startAmbientBookinfo(t)
	l, run, poll, step := tl.runningLab, tl.run, tl.poll, tl.step
	run("apply", "-f", filepath.Join(samples, "bookinfo/gateway-api/bookinfo-gateway.yaml"))
	run("annotate", "gateway", "bookinfo-gateway", "networking.istio.io/service-type=ClusterIP", "--namespace=default")

	// snip_get_gateway: the page's columns and bookinfo-gateway's row.
	out := poll("bookinfo-gateway programmed", func(out string) bool {
		return regexp.MustCompile(`(?m)^bookinfo-gateway\s+istio\s+bookinfo-gateway-istio\.default\.svc\.cluster\.local\s+True\s+\S+$`).MatchString(out)
	}, "get", "gateway")
	if !regexp.MustCompile(`^NAME\s+CLASS\s+ADDRESS\s+PROGRAMMED\s+AGE\n`).MatchString(out) {
		t.Errorf("get gateway:\n%s\nwant the page's NAME CLASS ADDRESS PROGRAMMED AGE", out)
	}

	// snip_apply_lua_gateway, snip_test_gateway_parity.
	if out := run("apply", "-f", writeTemp(t, "parity-at-gateway.yaml", parityAtGateway)); out != "trafficextension.extensions.istio.io/parity-at-gateway created\n" {
		t.Errorf("apply parity-at-gateway: %q, want kubectl's created line", out)
	}
	gatewayParity := []string{"exec", "deploy/curl", "--", "curl", "-s", "-o", "/dev/null", "-D", "-", "-H", "x-number: 4", "http://bookinfo-gateway-istio.default.svc.cluster.local/productpage"}
	out = poll("x-parity: even from the gateway", func(out string) bool { return parityLine(out) == "x-parity: even" }, gatewayParity...)
	if !strings.HasPrefix(out, "HTTP/1.1 200 OK") {
		t.Errorf("the gateway's answer:\n%s\nwant 200", out)
	}
	step("the parity filter at the gateway")

	// snip_create_waypoint, snip_verify_traffic.
	if out := run("waypoint", "apply", "--enroll-namespace", "--wait"); !strings.Contains(out, "waypoint default/waypoint applied") {
		t.Errorf("waypoint apply --enroll-namespace --wait:\n%s", out)
	}
	poll("productpage through the waypoint: 200", func(out string) bool { return out == "200" },
		"exec", "deploy/curl", "--", "curl", "-s", "-w", "%{http_code}", "-o", "/dev/null", "http://productpage:9080/productpage")
	// snip_get_gateway_waypoint.
	out = run("get", "gateway")
	for _, re := range []string{
		`(?m)^bookinfo-gateway\s+istio\s+bookinfo-gateway-istio\.default\.svc\.cluster\.local\s+True\s+\S+$`,
		`(?m)^waypoint\s+istio-waypoint\s+10\.\d+\.\d+\.\d+\s+True\s+\S+$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("get gateway:\n%s\nwant the page's row (%s)", out, re)
		}
	}

	// snip_apply_lua_waypoint_all, snip_test_waypoint_parity.
	run("apply", "-f", writeTemp(t, "parity-at-waypoint.yaml", parityAtWaypoint))
	waypointParity := []string{"exec", "deploy/curl", "--", "curl", "-s", "-o", "/dev/null", "-D", "-", "-H", "x-number: 7", "http://productpage:9080/productpage"}
	poll("x-parity: odd from the waypoint", func(out string) bool { return parityLine(out) == "x-parity: odd" }, waypointParity...)
	step("the parity filter on the whole waypoint")

	// snip_remove_waypoint_parity, snip_apply_lua_waypoint_service,
	// snip_test_waypoint_service_parity.
	if out := run("delete", "trafficextension", "parity-at-waypoint"); out != "trafficextension.extensions.istio.io \"parity-at-waypoint\" deleted\n" {
		t.Errorf("delete trafficextension parity-at-waypoint: %q", out)
	}
	run("apply", "-f", writeTemp(t, "parity-for-reviews.yaml", parityForReviews))
	poll("x-parity: odd from reviews' chain", func(out string) bool { return parityLine(out) == "x-parity: odd" },
		"exec", "deploy/curl", "--", "curl", "-s", "-o", "/dev/null", "-D", "-", "-H", "x-number: 3", "http://reviews:9080/reviews/1")
	// Not the page's: the filter is on reviews' chain only, productpage's has none now.
	poll("no x-parity from productpage", func(out string) bool {
		return strings.HasPrefix(out, "HTTP/1.1 200") && parityLine(out) == ""
	}, waypointParity...)
	step("the parity filter on the reviews Service's chain")

	// Not the page's: a script calling a method the proxy does not implement fails as
	// Envoy fails a script error: the request goes on, the waypoint logs the error.
	broken := strings.Replace(parityForReviews, `if number == nil then return end`, `if number == nil then request_handle:body() end`, 1)
	run("apply", "-f", writeTemp(t, "parity-for-reviews.yaml", broken))
	poll("reviews answers through the script's error", func(out string) bool { return out == "200" },
		"exec", "deploy/curl", "--", "curl", "-s", "-w", "%{http_code}", "-o", "/dev/null", "http://reviews:9080/reviews/1")
	poll("the waypoint's script error log", func(out string) bool {
		return strings.Contains(out, "script log: ") && strings.Contains(out, "StreamHandleWrapper:body() is not implemented by meshlab's proxy")
	}, "logs", "deploy/waypoint", "-n", "default")

	// snip_remove_traffic_extensions: parity-at-waypoint is gone already, as the page's
	// test runs it (kubectl deletes the others and reports the missing one).
	out, err := meshlab(t, "--lab", l.name, "delete", "trafficextension", "parity-at-gateway", "parity-at-waypoint", "parity-for-reviews")
	for _, want := range []string{
		"trafficextension.extensions.istio.io \"parity-at-gateway\" deleted\n",
		"trafficextension.extensions.istio.io \"parity-for-reviews\" deleted\n",
		`trafficextensions.extensions.istio.io "parity-at-waypoint" not found`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("delete trafficextension ...: %v\n%s\nwant %q", err, out, want)
		}
	}
	if out, _ := meshlab(t, "--lab", l.name, "get", "trafficextension"); !strings.Contains(out, "No resources found in default namespace.") {
		t.Errorf("get trafficextension after the clean-up:\n%s", out)
	}
}
