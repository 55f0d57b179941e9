package config

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"

	"github.com/meshlab/meshlab/controlplane/model"
)

// vipOffset is the offset of the first service VIP in the service CIDR: the low addresses
// stay free, as Kubernetes keeps them for the API server (.1) and DNS (.10).
const vipOffset = 10

// BuildOptions says where a scenario's addresses come from.
type BuildOptions struct {
	// PodCIDR is required. Its first host is the gateway (the node bridge); pods get the
	// next addresses in model order (sorted by namespace, then name).
	PodCIDR netip.Prefix
	// ServiceCIDR is required. Service VIPs start at the prefix address + 10 (10.96.0.10
	// in 10.96.0.0/16), in model order.
	ServiceCIDR netip.Prefix
}

// Build returns the mesh model of the scenario with addresses assigned deterministically:
// the same scenario and options always give the same addresses. It fails when a CIDR is
// missing, the two overlap, or one is too small. Build may be called more than once; each
// model is independent of the others and of the scenario.
func (s *Scenario) Build(o BuildOptions) (*model.Model, error) {
	if !o.PodCIDR.IsValid() {
		return nil, errors.New("build model: pod CIDR is required")
	}
	if !o.ServiceCIDR.IsValid() {
		return nil, errors.New("build model: service CIDR is required")
	}
	podCIDR, svcCIDR := o.PodCIDR.Masked(), o.ServiceCIDR.Masked()
	if podCIDR.Overlaps(svcCIDR) {
		return nil, fmt.Errorf("build model: pod CIDR %s overlaps service CIDR %s", podCIDR, svcCIDR)
	}
	var svcs []*model.Service
	var pods []*model.Pod
	for _, obj := range s.Objects {
		if obj.svc != nil {
			svcs = append(svcs, cloneService(obj.svc))
		}
		for _, p := range obj.pods {
			pods = append(pods, clonePod(p))
		}
	}
	injectPods(s.Objects, pods)
	gwSvcs, gwPods, err := gatewayDeployments(s.Objects)
	if err != nil {
		return nil, fmt.Errorf("build model: %w", err)
	}
	var podIPs []netip.Addr
	m := model.New(append(svcs, gwSvcs...), append(pods, gwPods...))
	m.Secrets = secretsOf(s.Objects)
	// The gateway takes offset 1, pods follow from offset 2.
	podIPs, err = addresses(podCIDR, 2, len(m.Pods))
	if err != nil {
		return nil, fmt.Errorf("assign pod addresses in %s (the gateway takes the first host): %w", podCIDR, err)
	}
	for i, p := range m.Pods {
		p.IP = podIPs[i]
	}
	vips, err := addresses(svcCIDR, vipOffset, len(m.Services))
	if err != nil {
		return nil, fmt.Errorf("assign service VIPs in %s (from offset %d): %w", svcCIDR, vipOffset, err)
	}
	for i, svc := range m.Services {
		svc.VIP = vips[i]
	}
	if m.Istio, m.Mesh, err = istioModel(s.Objects, m); err != nil {
		return nil, fmt.Errorf("build model: %w", err)
	}
	return m, nil
}

// Gateway returns the gateway address of a pod CIDR: its first host, which the node
// bridge holds and every pod routes through.
func Gateway(podCIDR netip.Prefix) netip.Addr {
	return podCIDR.Masked().Addr().Next()
}

// addresses returns n consecutive addresses of prefix starting at offset from the prefix
// address, refusing the prefix's last address (the IPv4 broadcast address).
func addresses(prefix netip.Prefix, offset, n int) ([]netip.Addr, error) {
	bits := prefix.Addr().BitLen() - prefix.Bits()
	if bits < 62 {
		room := (1 << bits) - 1 - offset // usable addresses at offset..last-1
		if room < n {
			return nil, fmt.Errorf("room for %d addresses, %d needed", max(room, 0), n)
		}
	}
	out := make([]netip.Addr, 0, n)
	a := prefix.Addr()
	for range offset {
		a = a.Next()
	}
	for range n {
		out = append(out, a)
		a = a.Next()
	}
	return out, nil
}

func cloneService(s *model.Service) *model.Service {
	c := *s
	c.Ports = append([]model.ServicePort(nil), s.Ports...)
	c.Selector = maps.Clone(s.Selector)
	return &c
}

func clonePod(p *model.Pod) *model.Pod {
	c := *p
	c.Labels = maps.Clone(p.Labels)
	c.Ports = append([]uint16(nil), p.Ports...)
	c.App.Command = append([]string(nil), p.App.Command...)
	c.App.Upstreams = append([]string(nil), p.App.Upstreams...)
	c.App.Args = append([]string(nil), p.App.Args...)
	return &c
}
