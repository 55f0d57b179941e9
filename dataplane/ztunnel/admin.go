package ztunnel

import (
	"github.com/meshlab/meshlab/ambientapi/security"
	"github.com/meshlab/meshlab/ambientapi/workload"
	"github.com/meshlab/meshlab/dataplane/ztunnel/admin"
)

// adminState is what the admin (dataplane/ztunnel/admin) shows of this ztunnel.
type adminState struct{ z *Ztunnel }

var _ admin.State = adminState{}

func (a adminState) Workloads() []*workload.Workload {
	ws := a.z.store.Workloads()
	out := make([]*workload.Workload, len(ws))
	for i, w := range ws {
		out[i] = w.Workload
	}
	return out
}

func (a adminState) Services() []*workload.Service {
	ss := a.z.store.Services()
	out := make([]*workload.Service, len(ss))
	for i, s := range ss {
		out[i] = s.Service
	}
	return out
}

func (a adminState) Policies() []*security.Authorization { return a.z.store.Policies() }

func (a adminState) Certificates() []admin.Certificate {
	var out []admin.Certificate
	for _, c := range a.z.certs.States() {
		ac := admin.Certificate{Identity: c.Identity, State: admin.CertInitializing}
		switch {
		case c.Cert != nil:
			ac.State, ac.Chain, ac.Roots = admin.CertAvailable, c.Cert.Chain, c.Cert.Roots
		case c.Err != nil:
			ac.State = admin.Unavailable(c.Err)
		}
		out = append(out, ac)
	}
	return out
}

func (a adminState) Pods() map[string]admin.Pod {
	out := map[string]admin.Pod{}
	for _, p := range a.z.pods.all() {
		p.mu.Lock()
		ap := admin.Pod{State: admin.PodPending, Name: p.info.Name, Namespace: p.info.Namespace, ServiceAccount: p.info.ServiceAccount}
		if p.state == "up" {
			ap.State = admin.PodUp
		}
		for t := range p.conns {
			c := admin.Connection{Src: t.info.Src, OriginalDst: t.info.Dst, ActualDst: t.actual, Protocol: t.proto.String()}
			if t.dir == Inbound {
				ap.Inbound = append(ap.Inbound, c)
			} else {
				ap.Outbound = append(ap.Outbound, c)
			}
		}
		p.mu.Unlock()
		out[p.uid] = ap
	}
	return out
}
