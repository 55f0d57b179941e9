package lab

import (
	"encoding/json"
	"net/netip"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/meshlab/meshlab/controlplane/config"
)

// TestServiceWaypointBoundCondition: `get svc -o yaml` shows istiod's
// istio.io/WaypointBound condition: True on a Service bound through its namespace's
// label, with the ingress label's note; False with istiod's reason on one naming a
// waypoint that does not exist, or one that takes workload traffic only; none on a
// Service that opts out or names nothing.
func TestServiceWaypointBoundCondition(t *testing.T) {
	t.Parallel()
	base, err := config.Load("ns.yaml", []byte(`
apiVersion: v1
kind: Namespace
metadata:
  name: default
  labels: {istio.io/dataplane-mode: ambient, istio.io/use-waypoint: waypoint}
---
apiVersion: v1
kind: Namespace
metadata: {name: other}
`))
	if err != nil {
		t.Fatal(err)
	}
	// Applied: a running lab takes a Service that selects no pod yet.
	sc, _, err := base.Apply(config.File{Name: "ambient.yaml", Data: []byte(`
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: waypoint, namespace: default}
spec:
  gatewayClassName: istio-waypoint
  listeners: [{name: mesh, port: 15008, protocol: HBONE}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: wl
  namespace: default
  labels: {istio.io/waypoint-for: workload}
spec:
  gatewayClassName: istio-waypoint
  listeners: [{name: mesh, port: 15008, protocol: HBONE}]
---
apiVersion: v1
kind: Service
metadata: {name: reviews, labels: {istio.io/ingress-use-waypoint: "true"}}
spec: {selector: {app: reviews}, ports: [{name: http, port: 9080}]}
---
apiVersion: v1
kind: Service
metadata: {name: optout, labels: {istio.io/use-waypoint: none}}
spec: {selector: {app: optout}, ports: [{name: http, port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: missing, namespace: other, labels: {istio.io/use-waypoint: nowhere}}
spec: {selector: {app: missing}, ports: [{name: http, port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: workloadonly, labels: {istio.io/use-waypoint: wl}}
spec: {selector: {app: w}, ports: [{name: http, port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: plain, namespace: other}
spec: {selector: {app: plain}, ports: [{name: http, port: 80}]}
`)})
	if err != nil {
		t.Fatal(err)
	}
	m, err := sc.Build(config.BuildOptions{PodCIDR: netip.MustParsePrefix("10.244.0.0/16"), ServiceCIDR: netip.MustParsePrefix("10.96.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	v := kubeView{model: m, objects: sc.Objects, ready: map[string]bool{}, serviceCIDR: netip.MustParsePrefix("10.96.0.0/16"), conds: &conditionClock{}, now: time.Now()}
	objs, err := v.selected("svc", "", "", labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	type cond struct{ Type, Status, Reason, Message, LastTransitionTime string }
	got := map[string][]cond{}
	for _, o := range objs {
		var s struct {
			Status struct {
				Conditions []cond `json:"conditions"`
			} `json:"status"`
		}
		if err := json.Unmarshal(o.Object, &s); err != nil {
			t.Fatal(err)
		}
		got[o.Namespace+"/"+o.Name] = s.Status.Conditions
	}
	for name, want := range map[string]*cond{
		"default/reviews":      {Type: "istio.io/WaypointBound", Status: "True", Reason: "WaypointAccepted", Message: "Successfully attached to waypoint default/waypoint. Ingress traffic will traverse the waypoint"},
		"default/optout":       nil,
		"other/missing":        {Type: "istio.io/WaypointBound", Status: "False", Reason: "WaypointIsNotReady", Message: `waypoint "other/nowhere" is not ready`},
		"default/workloadonly": {Type: "istio.io/WaypointBound", Status: "False", Reason: "UnsupportedTrafficType", Message: `attempting to bind to traffic type "service" which the waypoint "default/wl" does not support`},
		"other/plain":          nil,
	} {
		c := got[name]
		switch {
		case want == nil && len(c) != 0:
			t.Errorf("%s: conditions %+v, want none", name, c)
		case want == nil:
		case len(c) != 1 || c[0].LastTransitionTime == "":
			t.Errorf("%s: conditions %+v, want one with a lastTransitionTime", name, c)
		default:
			c[0].LastTransitionTime = ""
			if c[0] != *want {
				t.Errorf("%s: condition %+v\nwant %+v", name, c[0], *want)
			}
		}
	}
}
