package main

import (
	"bytes"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// generate prints what istioctl waypoint generate prints.
func TestWaypointGenerateAsIstioctl(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		f    waypointFlags
		ns   string
		want string
	}{
		{waypointFlags{name: "waypoint"}, "", `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: waypoint
spec:
  gatewayClassName: istio-waypoint
  listeners:
  - name: mesh
    port: 15008
    protocol: HBONE
`},
		{waypointFlags{name: "reviews-wp", trafficType: "workload", revision: "canary"}, "bookinfo", `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  labels:
    istio.io/rev: canary
    istio.io/waypoint-for: workload
  name: reviews-wp
  namespace: bookinfo
spec:
  gatewayClassName: istio-waypoint
  listeners:
  - name: mesh
    port: 15008
    protocol: HBONE
`},
	} {
		gw, err := makeWaypoint(&tc.f, tc.ns)
		if err != nil {
			t.Fatal(err)
		}
		got, err := waypointYAML(gw)
		if err != nil || got != tc.want {
			t.Errorf("generate %+v: got (%v)\n%s\nwant\n%s", tc.f, err, got, tc.want)
		}
	}
	if _, err := makeWaypoint(&waypointFlags{name: "none"}, ""); err == nil || err.Error() != "invalid name provided for waypoint, 'none' is a reserved value" {
		t.Errorf("name none: %v", err)
	}
	if _, err := makeWaypoint(&waypointFlags{name: "w", trafficType: "services"}, ""); err == nil || err.Error() != "invalid traffic type: services. Valid options are: [all none service workload]" {
		t.Errorf("--for services: %v", err)
	}
	if gw, _ := makeWaypoint(&waypointFlags{}, "default"); gw.Name != "waypoint" {
		t.Errorf("--name \"\": got %q, want waypoint", gw.Name)
	}
}

func waypointGW(ns, name, class string, labels map[string]string, programmed metav1.ConditionStatus) gwv1.Gateway {
	gw := gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Spec: gwv1.GatewaySpec{GatewayClassName: gwv1.ObjectName(class)}}
	if programmed != "" {
		gw.Status.Conditions = []metav1.Condition{{Type: "Accepted", Status: "True"}, {Type: "Programmed", Status: programmed}}
	}
	return gw
}

// list prints istioctl waypoint list's table: only waypoints, "none" for an unlabelled
// traffic type, the default revision, the Programmed condition.
func TestWaypointListAsIstioctl(t *testing.T) {
	t.Parallel()
	gws := []gwv1.Gateway{
		waypointGW("bookinfo", "reviews-wp", "istio-waypoint", map[string]string{"istio.io/waypoint-for": "workload", "istio.io/rev": "canary"}, "False"),
		waypointGW("bookinfo", "ingress", "istio", nil, "True"),
		waypointGW("default", "waypoint", "istio-waypoint", nil, "True"),
	}
	var b bytes.Buffer
	if err := printWaypointList(&b, gws, true); err != nil {
		t.Fatal(err)
	}
	want := `NAMESPACE     NAME           REVISION     TRAFFIC TYPE     PROGRAMMED
bookinfo      reviews-wp     canary       workload         False
default       waypoint       default      none             True
`
	if b.String() != want {
		t.Errorf("list -A: got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	if err := printWaypointList(&b, gws[2:], false); err != nil {
		t.Fatal(err)
	}
	if want := "NAME         REVISION     TRAFFIC TYPE     PROGRAMMED\nwaypoint     default      none             True\n"; b.String() != want {
		t.Errorf("list: got\n%q\nwant\n%q", b.String(), want)
	}
	b.Reset()
	_ = printWaypointList(&b, nil, false)
	if b.String() != "No waypoints found.\n" {
		t.Errorf("no gateways: %q", b.String())
	}
}

func TestWaypointCommandsAsIstioctl(t *testing.T) {
	t.Parallel()
	cmd := newWaypointCmd(&globalFlags{})
	var names []string
	for _, c := range cmd.Commands() {
		names = append(names, c.Name())
	}
	if got := strings.Join(names, " "); got != "apply delete generate list status" {
		t.Errorf("subcommands: %s", got)
	}
	for verb, flags := range map[string][]string{
		"apply":    {"for", "enroll-namespace", "overwrite", "wait", "waypoint-timeout", "revision", "name", "namespace"},
		"generate": {"for", "revision", "name", "namespace"},
		"list":     {"all-namespaces", "name", "namespace"},
		"delete":   {"all", "revision", "name", "namespace"},
		"status":   {"wait", "waypoint-timeout", "all-namespaces"},
	} {
		c, _, err := cmd.Find([]string{verb})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range flags {
			if c.Flag(f) == nil {
				t.Errorf("waypoint %s has no --%s", verb, f)
			}
		}
	}
	del, _, _ := cmd.Find([]string{"delete"})
	if err := del.Args(del, nil); err == nil || !strings.Contains(err.Error(), "must specify a waypoint name or delete all using --all") {
		t.Errorf("delete without names: %v", err)
	}
}
