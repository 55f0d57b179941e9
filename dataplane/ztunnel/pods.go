package ztunnel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/meshlab/meshlab/ambientapi/zds"
	"github.com/meshlab/meshlab/dataplane/ztunnel/inpod"
	"github.com/meshlab/meshlab/dataplane/ztunnel/state"
)

// findTimeout is how long one lookup of a pod's WDS workload waits (ztunnel's 5 s); the
// pod is looked up again until it appears or is removed.
const findTimeout = 5 * time.Second

// holdTimeout is how long a connection waits for its pod's workload and certificate
// before ztunnel gives up on it.
const holdTimeout = 10 * time.Second

// podManager is the inpod.Handler: the pods ztunnel serves.
type podManager struct {
	z   *Ztunnel
	ctx context.Context

	mu   sync.Mutex
	pods map[string]*pod
}

var _ inpod.Handler = (*podManager)(nil)

// pod is one enrolled pod: its namespace, its sockets and what its traffic waits for.
type pod struct {
	uid  string
	info state.WorkloadInfo
	ns   *inpod.Netns

	ctx     context.Context
	cancel  context.CancelFunc
	closers []io.Closer
	wg      sync.WaitGroup

	ready    chan struct{} // closed once the workload and its certificate are there
	mu       sync.Mutex
	wlUID    string // the WDS workload found for it
	identity string // its SPIFFE id, a certificate of which is held while it lives
	state    string // ztunnel's workloadState: pending, up
	conns    map[*tracked]struct{}
}

func (m *podManager) AddPod(uid string, info *zds.WorkloadInfo, f *os.File) error {
	ns := inpod.NewNetns(f)
	m.mu.Lock()
	old := m.pods[uid]
	m.mu.Unlock()
	if old != nil {
		if old.ns.Same(ns) {
			_ = ns.Close() // a replay after the node agent reconnected: nothing changed
			return nil
		}
		// The pod's namespace changed (a new sandbox): its old sockets go first.
		_ = m.DelPod(uid)
	}
	p := &pod{
		uid:   uid,
		info:  state.WorkloadInfo{Name: info.GetName(), Namespace: info.GetNamespace(), ServiceAccount: info.GetServiceAccount()},
		ns:    ns,
		ready: make(chan struct{}),
		state: "pending",
		conns: map[*tracked]struct{}{},
	}
	p.ctx, p.cancel = context.WithCancel(m.ctx)
	if err := m.z.open(p); err != nil {
		p.close()
		return err
	}
	m.mu.Lock()
	m.pods[uid] = p
	m.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		m.z.resolve(p)
	}()
	return nil
}

func (m *podManager) KeepPod(uid string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.pods[uid]; !ok {
		return fmt.Errorf("keep %s: pod unknown to this ztunnel", uid)
	}
	return nil
}

func (m *podManager) DelPod(uid string) error {
	m.mu.Lock()
	p := m.pods[uid]
	delete(m.pods, uid)
	m.mu.Unlock()
	if p == nil {
		return nil // already gone: deleting twice is fine, as in ztunnel
	}
	m.z.release(p)
	p.close()
	return nil
}

func (m *podManager) Snapshot(sent map[string]bool) {
	m.mu.Lock()
	var stale []string
	for uid := range m.pods {
		if !sent[uid] {
			stale = append(stale, uid)
		}
	}
	m.mu.Unlock()
	for _, uid := range stale {
		m.z.log.Info("pod not in the node agent's snapshot; removing", "uid", uid)
		_ = m.DelPod(uid)
	}
	m.z.zdsOnce.Do(func() { close(m.z.zdsSynced) })
}

func (m *podManager) closeAll() {
	m.mu.Lock()
	pods := m.pods
	m.pods = map[string]*pod{}
	m.mu.Unlock()
	for _, p := range pods {
		m.z.release(p)
		p.close()
	}
}

func (m *podManager) all() []*pod {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*pod, 0, len(m.pods))
	for _, p := range m.pods {
		out = append(out, p)
	}
	return out
}

// close stops the pod's listeners and connections and releases its namespace.
func (p *pod) close() {
	p.cancel()
	for _, c := range p.closers {
		_ = c.Close()
	}
	p.mu.Lock()
	for t := range p.conns {
		t.close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	_ = p.ns.Close()
}

// open creates the pod's sockets inside its namespace, in one entry into it, and starts
// serving them.
func (z *Ztunnel) open(p *pod) error {
	dnsAddr := fmt.Sprintf("127.0.0.1:%d", DNSPort)
	serves := []func(*pod, *net.TCPConn){z.serveOutbound, z.servePlaintext, z.serveHBONE}
	socks, err := p.ns.ListenAll([]inpod.Socket{
		{Network: "tcp", Addr: fmt.Sprintf(":%d", OutboundPort)},
		{Network: "tcp", Addr: fmt.Sprintf(":%d", InboundPort)},
		{Network: "tcp", Addr: fmt.Sprintf(":%d", HBONEPort)},
		{Network: "udp4", Addr: dnsAddr},
		{Network: "tcp4", Addr: dnsAddr},
	})
	if err != nil {
		return fmt.Errorf("pod %s/%s: %w", p.info.Namespace, p.info.Name, err)
	}
	p.closers = append(p.closers, socks...)
	for i, serve := range serves {
		ln := socks[i].(*net.TCPListener)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			z.accept(p, ln, serve)
		}()
	}
	pc, dln := socks[3].(net.PacketConn), socks[4].(*net.TCPListener)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		z.serveDNS(p, pc, dln)
	}()
	return nil
}

// accept hands every connection of ln to serve on a goroutine of its own.
func (z *Ztunnel) accept(p *pod, ln *net.TCPListener, serve func(*pod, *net.TCPConn)) {
	for {
		c, err := ln.AcceptTCP()
		if err != nil {
			if p.ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				z.log.Warn("accept", "pod", p.info.Name, "addr", ln.Addr(), "err", err)
			}
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer c.Close()
			// The pod's removal ends its connections (the copies then end both ways).
			stop := context.AfterFunc(p.ctx, func() { _ = c.Close() })
			defer stop()
			serve(p, c)
		}()
	}
}

// resolve finds the pod's WDS workload (retrying every findTimeout until found or the pod
// goes away), then holds a certificate for its identity; the pod's traffic waits for it.
func (z *Ztunnel) resolve(p *pod) {
	var w *state.Workload
	for w == nil {
		if w = z.store.WaitForInfo(p.ctx, p.info, findTimeout); w == nil {
			if p.ctx.Err() != nil {
				return
			}
			z.log.Warn("timed out waiting for the pod's workload from WDS; still waiting", "pod", p.info.Namespace+"/"+p.info.Name, "uid", p.uid)
		}
	}
	id := w.Identity()
	z.certs.Acquire(id)
	p.mu.Lock()
	p.wlUID, p.identity = w.GetUid(), id
	p.mu.Unlock()
	for {
		ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
		_, err := z.certs.Get(ctx, id)
		cancel()
		if err == nil {
			break
		}
		if p.ctx.Err() != nil {
			return
		}
		z.log.Warn("waiting for the pod's certificate", "pod", p.info.Namespace+"/"+p.info.Name, "identity", id, "err", err)
		time.Sleep(time.Second)
	}
	p.mu.Lock()
	p.state = "up"
	p.mu.Unlock()
	close(p.ready)
	z.log.Info("pod ready", "pod", p.info.Namespace+"/"+p.info.Name, "workload", w.GetUid(), "identity", id)
}

// release drops the pod's hold on its identity's certificate and closes the tunnels it
// originated.
func (z *Ztunnel) release(p *pod) {
	p.mu.Lock()
	id, uid := p.identity, p.wlUID
	p.identity = ""
	p.mu.Unlock()
	if id != "" {
		z.certs.Release(id)
	}
	if w := z.store.WorkloadByUID(uid); w != nil {
		for _, ip := range w.IPs {
			z.pool.CloseFrom(ip)
		}
	}
}

// wait holds a connection until the pod is ready and returns its current workload.
func (z *Ztunnel) wait(p *pod) (*state.Workload, error) {
	t := time.NewTimer(holdTimeout)
	defer t.Stop()
	select {
	case <-p.ready:
	case <-p.ctx.Done():
		return nil, p.ctx.Err()
	case <-t.C:
		return nil, fmt.Errorf("pod %s/%s: no workload or certificate after %s", p.info.Namespace, p.info.Name, holdTimeout)
	}
	p.mu.Lock()
	uid := p.wlUID
	p.mu.Unlock()
	if w := z.store.WorkloadByUID(uid); w != nil {
		return w, nil
	}
	if w := z.store.FindByInfo(p.info); w != nil {
		return w, nil
	}
	return nil, fmt.Errorf("pod %s/%s: its workload left WDS", p.info.Namespace, p.info.Name)
}
