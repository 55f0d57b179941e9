package lab

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAllocateNodePorts: LoadBalancer and NodePort Services get a node port per port in
// 30000-32767 (LoadBalancer ones allocateLoadBalancerNodePorts true), the same for the
// same uid at every render, none shared; a written nodePort is kept and taken; a
// Service made later never moves an earlier one's; ClusterIP Services and
// allocateLoadBalancerNodePorts false get none.
func TestAllocateNodePorts(t *testing.T) {
	t.Parallel()
	at := func(sec int) metav1.Time { return metav1.NewTime(time.Date(2026, 11, 30, 3, 0, sec, 0, time.UTC)) }
	svc := func(name string, typ corev1.ServiceType, created metav1.Time, ports ...corev1.ServicePort) corev1.Service {
		return corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", CreationTimestamp: created},
			Spec: corev1.ServiceSpec{Type: typ, Ports: ports}}
	}
	tcp := func(port, nodePort int32) corev1.ServicePort {
		return corev1.ServicePort{Port: port, Protocol: corev1.ProtocolTCP, NodePort: nodePort}
	}
	no := false
	base := func() []corev1.Service {
		off := svc("off", corev1.ServiceTypeLoadBalancer, at(0), tcp(80, 0))
		off.Spec.AllocateLoadBalancerNodePorts = &no
		return []corev1.Service{
			svc("gw", corev1.ServiceTypeLoadBalancer, at(1), tcp(15021, 0), tcp(80, 0), tcp(443, 0)),
			svc("np", corev1.ServiceTypeNodePort, at(2), tcp(8080, 31000)),
			svc("plain", corev1.ServiceTypeClusterIP, at(3), tcp(80, 0)),
			off,
		}
	}
	uid := func(s *corev1.Service) string { return "uid-of-" + s.Name }
	first := base()
	allocateNodePorts(first, uid)
	seen := map[int32]string{}
	for _, s := range first {
		for _, p := range s.Spec.Ports {
			switch {
			case s.Name == "plain" || s.Name == "off":
				if p.NodePort != 0 {
					t.Errorf("%s got node port %d", s.Name, p.NodePort)
				}
				continue
			case p.NodePort < 30000 || p.NodePort > 32767:
				t.Errorf("%s port %d: node port %d out of range", s.Name, p.Port, p.NodePort)
			case seen[p.NodePort] != "":
				t.Errorf("%s port %d: node port %d is %s's too", s.Name, p.Port, p.NodePort, seen[p.NodePort])
			}
			seen[p.NodePort] = s.Name
		}
	}
	if first[1].Spec.Ports[0].NodePort != 31000 {
		t.Errorf("written node port became %d", first[1].Spec.Ports[0].NodePort)
	}
	if a := first[0].Spec.AllocateLoadBalancerNodePorts; a == nil || !*a {
		t.Errorf("LoadBalancer's allocateLoadBalancerNodePorts %v, want true", a)
	}
	again := base()
	allocateNodePorts(again, uid)
	for i, p := range again[0].Spec.Ports {
		if p.NodePort != first[0].Spec.Ports[i].NodePort {
			t.Errorf("render 2: gw port %d node port %d, was %d", p.Port, p.NodePort, first[0].Spec.Ports[i].NodePort)
		}
	}
	// A later Service whose draw lands on gw's port 80 gets another; gw keeps its own.
	later := append(base(), svc("later", corev1.ServiceTypeLoadBalancer, at(9), tcp(80, 0)))
	allocateNodePorts(later, func(s *corev1.Service) string {
		if s.Name == "later" {
			return "uid-of-gw" // the same draw as gw's port 80
		}
		return uid(s)
	})
	if later[0].Spec.Ports[1].NodePort != first[0].Spec.Ports[1].NodePort || later[4].Spec.Ports[0].NodePort == later[0].Spec.Ports[1].NodePort || later[4].Spec.Ports[0].NodePort == 0 {
		t.Errorf("gw's port 80 %d (was %d), later's %d", later[0].Spec.Ports[1].NodePort, first[0].Spec.Ports[1].NodePort, later[4].Spec.Ports[0].NodePort)
	}
}
