package waypoint

import (
	"net/netip"
	"testing"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/meshlab/meshlab/controlplane/model"
)

func testModel() (*model.Model, *model.Waypoint) {
	w := &model.Waypoint{Name: "waypoint", Namespace: "default", For: model.WaypointForService}
	m := model.New(
		[]*model.Service{{Name: "waypoint", Namespace: "default", VIP: netip.MustParseAddr("10.96.0.12")}},
		[]*model.Pod{{Name: "waypoint-5b9c7f6d8-abcde", Namespace: "default", Labels: map[string]string{model.GatewayAPINameLabel: "waypoint"}, Router: true, Waypoint: true}},
	)
	m.Waypoints = []*model.Waypoint{w}
	return m, w
}

func TestStatusOnceReady(t *testing.T) {
	m, w := testModel()
	d := Deps{Model: m, PodReady: func(*model.Pod) bool { return false }}
	st := d.Status(w)
	if len(st.Addresses) != 0 {
		t.Errorf("not ready: no addresses, got %v", st.Addresses)
	}
	if c := st.Conditions[1]; c.Type != "Programmed" || c.Status != "False" {
		t.Errorf("not ready: got %+v", c)
	}
	d.PodReady = func(*model.Pod) bool { return true }
	st = d.Status(w)
	if len(st.Addresses) != 2 || st.Addresses[0].Value != "10.96.0.12" || *st.Addresses[0].Type != gwv1.IPAddressType ||
		st.Addresses[1].Value != "waypoint.default.svc.cluster.local" || *st.Addresses[1].Type != gwv1.HostnameAddressType {
		t.Errorf("ready: addresses %v", st.Addresses)
	}
	want := "Resource programmed, assigned to service(s) waypoint.default.svc.cluster.local:15008"
	if c := st.Conditions[1]; c.Status != "True" || c.Reason != "Programmed" || c.Message != want {
		t.Errorf("ready: got %+v", c)
	}
	if c := st.Conditions[0]; c.Type != "Accepted" || c.Status != "True" {
		t.Errorf("accepted: got %+v", c)
	}
}
