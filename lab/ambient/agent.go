// Package ambient is istio-cni's node agent in a lab: it decides which pods are in
// ambient mode (model.DataplaneMode), installs istio-cni's in-pod rules in their network
// namespaces (netns/inpod), hands each namespace to ztunnel over ZDS and, once ztunnel
// has acknowledged it, marks the pod with ambient.istio.io/redirection: enabled, which is
// what makes the control plane tell every peer that the pod speaks HBONE. Removal runs
// the other way. It also decides when the lab's ztunnel starts and reaches its admin.
//
// It sees the lab through Deps only, a narrow struct of values and functions.
package ambient

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/netns"
	"github.com/meshlab/meshlab/netns/inpod"
)

// Events the node agent publishes on the lab's bus.
const (
	EventEnrolled            = "ambient.enrolled"             // a pod is in the mesh: rules, ztunnel's ack, annotation
	EventRemoved             = "ambient.removed"              // a pod left the mesh
	EventFailed              = "ambient.failed"               // enrolling or removing a pod failed (Fields: error)
	EventZtunnelConnected    = "ambient.ztunnel.connected"    // ztunnel dialled ZDS and got the snapshot (Fields: pods)
	EventZtunnelDisconnected = "ambient.ztunnel.disconnected" // ztunnel's ZDS connection ended
)

// Deps is the lab as the node agent sees it.
type Deps struct {
	Log    *slog.Logger // required
	Socket string       // required: the ZDS socket ztunnel dials (INPOD_UDS)
	// NetNS names the network namespace of the pod with key podKey. Required.
	NetNS func(podKey string) string
	// NetNSPath is the file of a named network namespace. Optional: netns.Path.
	NetNSPath func(name string) string
	// Rules installs the in-pod rules; RulesConfig says which. Required.
	Rules       inpod.Applier
	RulesConfig inpod.Config
	// SetRedirection sets (enabled) or removes the pod's ambient.istio.io/redirection
	// annotation in the lab's model and pushes the model to the control plane. Required.
	// It is called holding that pod's lock of the agent only (setting it, from a
	// goroutine of the agent's; removing it, from Reconcile's): Reconcile's and Enroll's
	// callers must not hold a lock SetRedirection takes.
	SetRedirection func(podKey string, enabled bool)
	// StartZtunnel starts the lab's ztunnel (a supervised process the lab restarts when
	// it dies). Optional: the agent calls it once, when the lab first has an ambient pod.
	StartZtunnel func() error
	// Publish puts an event on the lab's bus. Optional.
	Publish func(kind, pod, msg string, fields map[string]any)
}

// NodeAgent is istio-cni's node agent of one lab. Reconcile and WaitEnrolled may be
// called from any goroutine; Run serves ZDS until its context ends.
type NodeAgent struct {
	d Deps

	reconcileMu sync.Mutex // one Reconcile at a time

	podLocksMu sync.Mutex
	podLocks   map[string]*sync.Mutex // per pod key: one enrollment or removal of a pod at a time

	mu      sync.Mutex
	pods    map[string]*enrolled // by pod key: pods whose rules are installed
	conn    *conn                // the connected ztunnel, nil when none
	changed chan struct{}        // closed and replaced when a pod's state changes
	started bool                 // StartZtunnel succeeded
	ln      *net.UnixListener
	closed  bool

	annotations sync.WaitGroup // annotate's goroutines; Run waits for them
}

// enrolled is a pod in the mesh (or on its way): its rules are installed.
type enrolled struct {
	pod   *model.Pod
	netns string
	uid   string   // stable for this incarnation of the pod (its namespace's inode)
	fd    *os.File // the pod's network namespace, held open while enrolled, as istio-cni's cache
	ino   uint64
	// acked: the connected ztunnel acknowledged its add. annotating: the annotation was
	// asked for (annotate). annotated: SetRedirection(true) returned (both stay across
	// ztunnel restarts, as istio-cni leaves the annotation).
	acked, annotating, annotated bool
}

// New returns the node agent; it listens once Run is called.
func New(d Deps) *NodeAgent {
	return &NodeAgent{d: d, pods: map[string]*enrolled{}, changed: make(chan struct{})}
}

// ambientPods are m's pods in ambient mode, by key.
func ambientPods(m *model.Model) map[string]*model.Pod {
	out := map[string]*model.Pod{}
	if m == nil {
		return out
	}
	for _, p := range m.Pods {
		if isAmbient(m, p) {
			out[p.Key()] = p
		}
	}
	return out
}

// Reconcile makes the mesh's enrolled pods m's ambient pods: a new ambient pod (or a pod
// whose namespace is new, a pod replaced under the same name) is enrolled, a pod no longer
// in ambient mode or gone is removed. Enrolling a pod installs its rules, sends it to
// ztunnel when one is connected and waits for the ack (else the snapshot of ztunnel's
// next connection carries it); the annotation follows on its own (annotate), and
// WaitEnrolled waits for it. It returns every pod's failure.
func (a *NodeAgent) Reconcile(m *model.Model) error {
	a.reconcileMu.Lock()
	defer a.reconcileMu.Unlock()
	want := ambientPods(m)
	a.mu.Lock()
	keys := slices.Collect(maps.Keys(a.pods))
	a.mu.Unlock()
	for k := range want {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var errs []error
	for _, key := range keys {
		if err := a.reconcilePod(key, want[key]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// reconcilePod makes pod key enrolled when p is not nil (as p), removed otherwise.
func (a *NodeAgent) reconcilePod(key string, p *model.Pod) error {
	unlock := a.lockPod(key)
	defer unlock()
	a.mu.Lock()
	e, ok := a.pods[key]
	a.mu.Unlock()
	if ok && p != nil && a.sameIncarnation(e, p) {
		a.mu.Lock()
		e.pod = p // labels or annotations changed: the pod stays
		a.mu.Unlock()
		return nil
	}
	if ok {
		if err := a.remove(e); err != nil {
			return err
		}
	}
	if p == nil {
		return nil
	}
	return a.enroll(p, nil)
}

// lockPod serialises the enrollment and removal of one pod; pods go in parallel.
func (a *NodeAgent) lockPod(key string) (unlock func()) {
	a.podLocksMu.Lock()
	if a.podLocks == nil {
		a.podLocks = map[string]*sync.Mutex{}
	}
	mu := a.podLocks[key]
	if mu == nil {
		mu = &sync.Mutex{}
		a.podLocks[key] = mu
	}
	a.podLocksMu.Unlock()
	mu.Lock()
	return mu.Unlock
}

// Enroll enrolls p, a pod of m in ambient mode that is being made (its network namespace
// is new), unless the agent holds it already; it returns once ztunnel has acknowledged it
// or, when no ztunnel is connected, once its rules are in place (WaitEnrolled waits for
// the annotation). podRules, the iptables-restore input of the pod's own rules (its
// cluster DNS), go in with istio-cni's in one iptables-restore
// (inpod.Applier.InstallNew), which inserts istio-cni's jumps ahead of them. Enroll reports whether it installed podRules: when it did
// not (p is not in ambient mode, the agent held it already, or installing failed) the
// caller installs them itself.
func (a *NodeAgent) Enroll(m *model.Model, p *model.Pod, podRules string) (bool, error) {
	if !isAmbient(m, p) {
		return false, nil
	}
	key := p.Key()
	unlock := a.lockPod(key)
	defer unlock()
	a.mu.Lock()
	e, held := a.pods[key]
	a.mu.Unlock()
	if held && a.sameIncarnation(e, p) {
		return false, nil // a Reconcile of the new model took it first
	}
	if held { // the pod of that name before this one
		if err := a.remove(e); err != nil {
			return false, err
		}
	}
	installed := false
	err := a.enroll(p, func(ns string) error {
		err := a.d.Rules.InstallNew(ns, a.d.RulesConfig, podRules)
		installed = err == nil
		return err
	})
	return installed, err
}

// sameIncarnation reports whether e's namespace is still the one pod p lives in.
func (a *NodeAgent) sameIncarnation(e *enrolled, p *model.Pod) bool {
	ino, err := inode(a.path(a.d.NetNS(p.Key())))
	return err == nil && ino == e.ino
}

func (a *NodeAgent) path(ns string) string {
	if a.d.NetNSPath != nil {
		return a.d.NetNSPath(ns)
	}
	return netns.Path(ns)
}

func inode(path string) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// enroll adds p to the mesh. install puts the rules in the pod's namespace ns; nil is
// Rules.Install (a namespace that may have them already).
func (a *NodeAgent) enroll(p *model.Pod, install func(ns string) error) error {
	key := p.Key()
	ns := a.d.NetNS(key)
	fail := func(err error) error {
		err = fmt.Errorf("enroll pod %s in ambient mode: %w", key, err)
		a.publish(EventFailed, key, err.Error(), map[string]any{"error": err.Error()})
		return err
	}
	fd, err := os.Open(a.path(ns))
	if err != nil {
		return fail(err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(fd.Fd()), &st); err != nil {
		fd.Close()
		return fail(err)
	}
	if install == nil {
		install = func(ns string) error { return a.d.Rules.Install(ns, a.d.RulesConfig) }
	}
	if err := install(ns); err != nil {
		fd.Close()
		return fail(err)
	}
	e := &enrolled{pod: p, netns: ns, fd: fd, ino: st.Ino, uid: podUID(p, st.Ino)}
	a.mu.Lock()
	a.pods[key] = e
	c := a.conn
	a.notifyLocked()
	a.mu.Unlock()
	a.d.Log.Info("in-pod rules installed", "pod", key, "uid", e.uid)
	if err := a.startZtunnel(); err != nil {
		a.d.Log.Warn("start ztunnel", "err", err)
	}
	if c == nil {
		return nil // ztunnel's snapshot will carry it
	}
	if err := c.send(addRequest(*e), int(fd.Fd())); err != nil {
		var ack *AckError
		if errors.As(err, &ack) {
			return fail(err)
		}
		a.d.Log.Warn("send pod to ztunnel; its next connection's snapshot carries it", "pod", key, "err", err)
		return nil
	}
	a.acked(c, e)
	return nil
}

// remove takes e out of the mesh as istio-cni does: the annotation first (peers stop
// tunnelling to it), then its rules, then ztunnel lets go of it.
func (a *NodeAgent) remove(e *enrolled) error {
	key := e.pod.Key()
	a.mu.Lock()
	delete(a.pods, key)
	c := a.conn
	annotated := e.annotated
	a.notifyLocked()
	a.mu.Unlock()
	defer e.fd.Close()
	if annotated {
		a.d.SetRedirection(key, false)
	}
	var errs []error
	if _, err := os.Stat(a.path(e.netns)); err == nil { // a pod deleted has no rules left to remove
		if err := a.d.Rules.Remove(e.netns, a.d.RulesConfig); err != nil {
			errs = append(errs, err)
		}
	}
	if c != nil {
		if err := c.send(delRequest(e.uid), -1); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		err = fmt.Errorf("remove pod %s from ambient mode: %w", key, err)
		a.publish(EventFailed, key, err.Error(), map[string]any{"error": err.Error()})
		return err
	}
	a.publish(EventRemoved, key, fmt.Sprintf("pod %s removed from ambient mode", key), nil)
	return nil
}

// acked records that ztunnel on c acknowledged e's add and, the first time, has the pod
// annotated.
func (a *NodeAgent) acked(c *conn, e *enrolled) {
	a.mu.Lock()
	if a.conn != c || a.pods[e.pod.Key()] != e {
		a.mu.Unlock()
		return // a newer connection's snapshot, or the pod left meanwhile
	}
	e.acked = true
	first := !e.annotating
	e.annotating = true
	a.notifyLocked()
	a.mu.Unlock()
	if first {
		a.annotate(e)
	}
}

// annotate sets e's redirection annotation on a goroutine of its own, as istio-cni's node
// agent patches the pod once ztunnel has it: the pod's app does not wait for the control
// plane's push (WaitAcked), its readiness does (WaitEnrolled), and the pods ztunnel
// acknowledges together (a snapshot of a hundred) share pushes instead of waiting for one
// each in turn. It takes the pod's lock, so an annotation and the pod's removal happen in
// the order they were decided: a pod removed first is not annotated.
func (a *NodeAgent) annotate(e *enrolled) {
	key := e.pod.Key()
	a.annotations.Go(func() {
		unlock := a.lockPod(key)
		defer unlock()
		a.mu.Lock()
		current := a.pods[key] == e
		a.mu.Unlock()
		if !current {
			return
		}
		a.d.SetRedirection(key, true)
		a.mu.Lock()
		e.annotated = true
		a.notifyLocked()
		a.mu.Unlock()
		a.publish(EventEnrolled, key, fmt.Sprintf("pod %s in ambient mode: in-pod rules, ztunnel, HBONE", key), map[string]any{"uid": e.uid})
	})
}

// notifyLocked wakes WaitEnrolled. The caller holds a.mu.
func (a *NodeAgent) notifyLocked() {
	close(a.changed)
	a.changed = make(chan struct{})
}

// WaitEnrolled waits until every pod of keys that is to be enrolled is annotated (ztunnel
// acknowledged it and the annotation was pushed), or ctx ends; it returns which are not,
// if any.
func (a *NodeAgent) WaitEnrolled(ctx context.Context, keys []string) error {
	return a.wait(ctx, keys, func(e *enrolled) bool { return e.annotated })
}

// WaitAcked waits until ztunnel has the pod key (it acknowledged the pod's add, or did
// before it last reconnected and the annotation stays), or ctx ends: what istio-cni's CNI
// plugin waits for before the pod's containers start.
func (a *NodeAgent) WaitAcked(ctx context.Context, key string) error {
	return a.wait(ctx, []string{key}, func(e *enrolled) bool { return e.acked || e.annotated })
}

func (a *NodeAgent) wait(ctx context.Context, keys []string, done func(*enrolled) bool) error {
	for {
		a.mu.Lock()
		var missing []string
		for _, k := range keys {
			if e, ok := a.pods[k]; !ok || !done(e) {
				missing = append(missing, k)
			}
		}
		connected := a.conn != nil
		ch := a.changed
		a.mu.Unlock()
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			why := "ztunnel did not acknowledge them"
			if !connected {
				why = "ztunnel is not connected"
			}
			return fmt.Errorf("pods not in ambient mode yet (%s): %v", why, missing)
		}
	}
}

// Mode reports the pod's enrollment: "" when the agent does not hold it, "pending" when
// its rules are installed and ztunnel has not acknowledged it, "enabled" once annotated.
func (a *NodeAgent) Mode(podKey string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.pods[podKey]
	switch {
	case !ok:
		return ""
	case e.annotated:
		return "enabled"
	}
	return "pending"
}

// Annotated reports whether the pod carries the redirection annotation.
func (a *NodeAgent) Annotated(podKey string) bool { return a.Mode(podKey) == "enabled" }

// Connected reports whether a ztunnel is connected.
func (a *NodeAgent) Connected() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.conn != nil
}

// ZtunnelStarted reports whether the agent has started the lab's ztunnel.
func (a *NodeAgent) ZtunnelStarted() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.started
}

// startZtunnel starts the lab's ztunnel the first time a pod is enrolled.
func (a *NodeAgent) startZtunnel() error {
	a.mu.Lock()
	if a.started || a.d.StartZtunnel == nil || a.closed {
		a.mu.Unlock()
		return nil
	}
	a.started = true
	a.mu.Unlock()
	if err := a.d.StartZtunnel(); err != nil {
		a.mu.Lock()
		a.started = false // the next enrollment tries again
		a.mu.Unlock()
		return err
	}
	return nil
}

// Listen opens the ZDS socket (replacing a stale one). Call it before Run.
func (a *NodeAgent) Listen() error {
	if err := os.Remove(a.d.Socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale ZDS socket: %w", err)
	}
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: a.d.Socket, Net: "unixpacket"})
	if err != nil {
		return fmt.Errorf("listen for ztunnel on %s: %w", a.d.Socket, err)
	}
	if err := os.Chmod(a.d.Socket, 0o600); err != nil {
		ln.Close()
		return fmt.Errorf("listen for ztunnel on %s: %w", a.d.Socket, err)
	}
	a.mu.Lock()
	a.ln = ln
	a.mu.Unlock()
	return nil
}

// Run serves ZDS on the socket Listen opened until ctx ends, then closes it, the
// connection and every namespace it holds. The newest ztunnel connection is the one pods
// are sent to, as istio-cni sends adds to its latest connection.
func (a *NodeAgent) Run(ctx context.Context) error {
	a.mu.Lock()
	ln := a.ln
	a.mu.Unlock()
	if ln == nil {
		return errors.New("serve ZDS: Listen was not called")
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer func() {
		a.mu.Lock()
		a.closed = true
		c := a.conn
		a.mu.Unlock()
		if c != nil {
			c.close()
		}
		wg.Wait()
		a.annotations.Wait()
		a.mu.Lock()
		for _, e := range a.pods {
			e.fd.Close()
		}
		a.mu.Unlock()
		_ = os.Remove(a.d.Socket)
	}()
	for {
		u, err := ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			a.d.Log.Warn("accept ztunnel", "err", err)
			time.Sleep(200 * time.Millisecond) // as istio-cni's limiter: a dialling loop must not spin
			continue
		}
		c := newConn(u, a.d.Log)
		wg.Go(func() { a.serve(ctx, c) })
	}
}

// serve runs one ztunnel connection: hello, snapshot, then requests until it ends.
func (a *NodeAgent) serve(ctx context.Context, c *conn) {
	defer c.wait()
	defer c.close()
	if _, err := c.readHello(); err != nil {
		a.d.Log.Warn("ztunnel connection", "err", err)
		return
	}
	c.start()
	if err := a.sendSnapshot(c); err != nil {
		a.d.Log.Warn("send snapshot to ztunnel", "err", err)
		a.disconnected(c)
		return
	}
	defer a.disconnected(c)
	select {
	case <-ctx.Done():
	case <-c.closed:
	}
}

// sendSnapshot makes c the current connection and sends it every enrolled pod, then
// snapshot_sent. c's write lock is held while they are written, so an enrollment that
// saw c as current sends its add after the snapshot, and one that did not is in the
// snapshot. The acks are awaited after the writes (pipelined, see zds.go).
func (a *NodeAgent) sendSnapshot(c *conn) error {
	c.mu.Lock()
	a.mu.Lock()
	old := a.conn
	a.conn = c
	pods := slices.SortedFunc(maps.Values(a.pods), func(x, y *enrolled) int { return compare(x.pod.Key(), y.pod.Key()) })
	for _, e := range pods {
		e.acked = false
	}
	a.notifyLocked()
	a.mu.Unlock()
	if old != nil {
		old.close()
	}
	acks := make([]<-chan error, len(pods))
	for i, e := range pods {
		ack, err := c.post(addRequest(*e), int(e.fd.Fd()))
		if err != nil {
			c.mu.Unlock()
			return err
		}
		acks[i] = ack
	}
	done, err := c.post(snapshotSent, -1)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	for i, e := range pods {
		err := <-acks[i]
		var ack *AckError
		switch {
		case errors.As(err, &ack):
			a.d.Log.Warn("ztunnel refused a pod of the snapshot", "pod", e.pod.Key(), "err", err)
			a.publish(EventFailed, e.pod.Key(), err.Error(), map[string]any{"error": err.Error()})
			continue
		case err != nil:
			return err
		}
		a.acked(c, e)
	}
	if err := <-done; err != nil {
		return err
	}
	a.d.Log.Info("ztunnel connected; snapshot sent", "pods", len(pods))
	a.publish(EventZtunnelConnected, "", fmt.Sprintf("ztunnel connected: %d pods sent", len(pods)), map[string]any{"pods": len(pods)})
	return nil
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// disconnected forgets c. The pods keep their rules: with nothing listening on the
// proxy's ports their connections fail until ztunnel is back, as in Istio; nothing
// goes around it.
func (a *NodeAgent) disconnected(c *conn) {
	a.mu.Lock()
	if a.conn != c {
		a.mu.Unlock()
		return
	}
	a.conn = nil
	for _, e := range a.pods {
		e.acked = false
	}
	a.notifyLocked()
	a.mu.Unlock()
	a.d.Log.Warn("ztunnel disconnected; enrolled pods have no proxy until it is back")
	a.publish(EventZtunnelDisconnected, "", "ztunnel disconnected: enrolled pods have no proxy until it reconnects", nil)
}

func (a *NodeAgent) publish(kind, pod, msg string, fields map[string]any) {
	if a.d.Publish != nil {
		a.d.Publish(kind, pod, msg, fields)
	}
}

// podUID is the pod's ZDS uid: a UUID-shaped digest of its namespace, name and network
// namespace's inode, stable for the pod's life and new when the pod is made again.
func podUID(p *model.Pod, ino uint64) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/%s/%d", p.Namespace, p.Name, ino))
	b := sum[:16]
	b[6] = b[6]&0x0f | 0x50 // a name-based UUID's version nibble
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
