package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/lab/ambient"
	"github.com/meshlab/meshlab/netns/inpod"
)

// The lab's istio-cni node agent (lab/ambient) and its ztunnel. An ambient pod costs its
// app only: no agent, no proxy, no sidecar capture rules; its cluster DNS is kube-dns as
// for any pod without a sidecar (kubedns.go). Before its app starts the node agent puts
// istio-cni's in-pod rules in its namespace (their jumps ahead of the kube-dns rule, which
// then gets only what ztunnel's DNS proxy forwards),
// then hands the namespace to ztunnel and, on ztunnel's ack, annotates the pod in the
// model (ambient.istio.io/redirection: enabled), which makes WDS give it HBONE; the pod is
// ready once annotated. A model change (apply, delete, a label on a namespace or pod)
// reconciles every pod's enrollment live, without touching its app. The annotations live
// in the running model: a model rebuilt by apply gets them again before it is pushed.

// ztunnelDir is where the ztunnel's run files live: its ZDS socket, log, token, root.
func ztunnelDir(p Paths) string { return filepath.Join(p.Dir, "ztunnel") }

// newNodeAgent makes the lab's node agent and starts serving ZDS.
func newNodeAgent(ctx context.Context, l *Lab) (*ambient.NodeAgent, error) {
	dir := ztunnelDir(l.paths)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create ztunnel run directory: %w", err)
	}
	a := ambient.New(ambient.Deps{
		Log:            l.log.With("component", "istio-cni"),
		Socket:         filepath.Join(dir, "ztunnel.sock"),
		NetNS:          func(key string) string { return NamespaceName(l.opts.Name, key) },
		Rules:          inpod.NewApplier(),
		RulesConfig:    inpod.DefaultConfig(),
		SetRedirection: func(key string, on bool) { setRedirection(l, key, on) },
		StartZtunnel:   func() error { return startZtunnel(l) },
		Publish:        l.publish,
	})
	if err := a.Listen(); err != nil {
		return nil, err
	}
	l.servers.Add(1)
	go func() {
		defer l.servers.Done()
		if err := a.Run(ctx); err != nil {
			l.log.Error("ZDS server stopped", "err", err)
		}
	}()
	return a, nil
}

// enrollAmbientPod enrolls pod p, whose namespace was just made and which is about to
// start its app, when it is in ambient mode; it reports whether it is, and whether
// podRules (the pod's own iptables-restore input: its cluster DNS) went in with istio-cni's
// rules, in one iptables-restore; when not, the caller installs them.
func enrollAmbientPod(l *Lab, p *model.Pod, podRules string) (ambient, installed bool, err error) {
	if l.ambient == nil {
		return false, false, nil
	}
	l.mu.Lock()
	m := l.model
	l.mu.Unlock()
	if model.DataplaneMode(m, p) != model.DataplaneAmbient {
		return false, false, nil
	}
	installed, err = l.ambient.Enroll(m, p, podRules)
	return true, installed, err
}

// waitAmbientPod waits until ztunnel has pod p and, when annotated, until the pod is
// annotated too (its redirection pushed), as a sidecar pod waits for its proxy: a pod
// that is not in time is a *notReadyError. The app starts after the first wait, the pod
// is ready after the second.
func waitAmbientPod(ctx context.Context, l *Lab, p *model.Pod, annotated bool) error {
	var err error
	if annotated {
		err = l.ambient.WaitEnrolled(ctx, []string{p.Key()})
	} else {
		err = l.ambient.WaitAcked(ctx, p.Key())
	}
	if err == nil || ctx.Err() == nil {
		return err
	}
	return &notReadyError{err: ctx.Err(), msg: fmt.Sprintf("not in ambient mode within %s: %v (see %s)", l.opts.ReadyTimeout, err, ztunnelDir(l.paths))}
}

// reconcileAmbient makes every pod's enrollment follow the current model, after an
// apply or delete changed it. The caller holds no lab lock.
func reconcileAmbient(l *Lab) {
	if l.ambient == nil {
		return
	}
	l.mu.Lock()
	m := l.model
	l.mu.Unlock()
	if err := l.ambient.Reconcile(m); err != nil {
		l.log.Warn("ambient enrollment", "err", err)
	}
	// The first pod enrolled starts ztunnel, whose first snapshot then carries the pods:
	// wait for it, as an apply waits for the pods it makes, so that traffic sent once
	// apply (or label) returned finds them in the mesh.
	var keys []string
	for _, p := range m.Pods {
		if model.DataplaneMode(m, p) == model.DataplaneAmbient {
			keys = append(keys, p.Key())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.opts.ReadyTimeout)
	defer cancel()
	if err := l.ambient.WaitEnrolled(ctx, keys); err != nil {
		l.log.Warn("ambient enrollment", "err", err)
	}
}

// withEnrolled returns m with the redirection annotation on every pod the node agent has
// annotated: apply rebuilds the model from the scenario, which does not carry it.
func withEnrolled(l *Lab, m *model.Model) *model.Model {
	if l.ambient == nil {
		return m
	}
	for _, p := range m.Pods {
		if l.ambient.Annotated(p.Key()) && !p.AmbientRedirected() {
			m = withRedirection(m, p.Key(), true)
		}
	}
	return m
}

// setRedirection sets or removes the pod's redirection annotation in the running model
// and pushes it to the control plane; it returns once the push that carries it has run.
// The model changes under l.mu and the push is queued there, as an apply's; the wait is
// outside it, so the pods ztunnel acknowledges while a push runs are carried by one
// next push (lab/push merges them: each model holds every earlier annotation), not one
// push each: a push generates WDS for every pod, and one per pod made a large ambient
// `up` quadratic (1000 pods: ~1000 pushes of 1500 addresses, one after another).
func setRedirection(l *Lab, key string, on bool) {
	l.mu.Lock()
	m := withRedirection(l.model, key, on)
	if m == l.model {
		l.mu.Unlock()
		return
	}
	l.model = m
	// Through the push queue (lab/push), after any applied change still being pushed, so
	// that an older model's push never lands after this one.
	l.push.Store("ambient", func(ctx context.Context, trigger string) error { return l.updateProxies(ctx, m, trigger) })
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := l.push.Flush(ctx); err != nil {
		l.log.Warn("push the redirection annotation", "pod", key, "err", err)
	}
}

// withRedirection returns a copy of m whose pod key has (on) or lacks the annotation; m
// itself when it already is so or has no such pod. m is not changed: readers hold it.
func withRedirection(m *model.Model, key string, on bool) *model.Model {
	i := slices.IndexFunc(m.Pods, func(p *model.Pod) bool { return p.Key() == key })
	if i < 0 || m.Pods[i].AmbientRedirected() == on {
		return m
	}
	next := *m
	next.Pods = slices.Clone(m.Pods)
	p := *m.Pods[i]
	p.Annotations = maps.Clone(p.Annotations)
	if on {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[model.AnnotationAmbientRedirection] = model.AmbientRedirectionEnabled
	} else {
		delete(p.Annotations, model.AnnotationAmbientRedirection)
	}
	next.Pods[i] = &p
	return &next
}

// ztunnelKey is the pod key of the lab's ztunnel.
func ztunnelKey(l *Lab) string {
	return model.PodKey(ambient.ZtunnelNamespace, ambient.ZtunnelPodName(l.opts.Name))
}

// startZtunnel makes the ztunnel pod: its namespace on the node's bridge, its token and
// the mesh's root in its run directory, and `meshlab ztunnel` supervised like a pod's
// agent (restarted when it exits).
func startZtunnel(l *Lab) error {
	key := ztunnelKey(l)
	name := ambient.ZtunnelPodName(l.opts.Name)
	dir := ztunnelDir(l.paths)
	ip := ambient.ZtunnelIP(l.opts.PodCIDR)
	if err := os.MkdirAll(l.paths.PodDir(key), 0o755); err != nil {
		return fmt.Errorf("create run directory of %s: %w", key, err)
	}
	l.mu.Lock()
	l.ztunnelSince = time.Now()
	l.mu.Unlock()
	// Ahead of the pods waiting for a net slot: every one of them waits for ztunnel.
	if err := l.podNetworks().MakeNow(key, ip); err != nil {
		return err
	}
	if l.ca == nil {
		return fmt.Errorf("start %s: the lab has no CA", key)
	}
	tok, err := l.ca.Tokens().IssueZtunnel() // identity istio-system/ztunnel, istiod's trusted node account
	if err != nil {
		return fmt.Errorf("issue the CA token of %s: %w", key, err)
	}
	tokenFile, rootFile := filepath.Join(dir, "token"), filepath.Join(dir, "root-cert.pem")
	if err := os.WriteFile(tokenFile, []byte(tok), 0o600); err != nil {
		return fmt.Errorf("write the CA token of %s: %w", key, err)
	}
	if err := os.WriteFile(rootFile, l.ca.Authority().RootPEM(), 0o644); err != nil {
		return fmt.Errorf("write the mesh root for %s: %w", key, err)
	}
	cfg := ambient.ZtunnelConfig{
		Socket:      filepath.Join(dir, "ztunnel.sock"),
		XDSAddress:  "unix://" + l.paths.XDSSocket(),
		NodeName:    NodeNamespace(l.opts.Name),
		PodName:     name,
		InstanceIP:  ip,
		TrustDomain: l.ca.Authority().TrustDomain(),
		TokenFile:   tokenFile,
		RootCert:    rootFile,
	}
	err = l.agents.start(processSpec{
		Role: "ztunnel", Pod: key, NetNS: NamespaceName(l.opts.Name, key),
		Argv: []string{l.opts.MeshlabPath, "ztunnel"}, Env: cfg.Env(),
		LogPath: ZtunnelLogFile(l.paths), Grace: 5 * time.Second,
	})
	if err != nil {
		return err
	}
	l.publish(EventPodCreated, key, fmt.Sprintf("ztunnel %s started: namespace %s, %s", key, NamespaceName(l.opts.Name, key), ip),
		map[string]any{"ip": ip.String(), "ztunnel": true})
	fmt.Fprintf(l.out, "pod %-20s %-15s ztunnel started\n", key, ip)
	return nil
}

// fillDataplane sets d's data-plane mode and, for an ambient pod, its enrollment and its
// in-pod rules with their counters, as `describe pod` shows them.
func fillDataplane(l *Lab, p *model.Pod, d *api.PodDetail) {
	l.mu.Lock()
	m := l.model
	l.mu.Unlock()
	mode := model.DataplaneMode(m, p)
	d.DataplaneMode = mode.String()
	if mode != model.DataplaneAmbient || l.ambient == nil {
		return
	}
	st := &api.AmbientStatus{Redirection: l.ambient.Mode(p.Key())}
	d.Ambient = st
	ns := NamespaceName(l.opts.Name, p.Key())
	saved, err := inpod.Save(ns, inpod.IPv4)
	if err != nil {
		st.Error = err.Error()
		return
	}
	st.Rules = inpodLines(saved)
	cfg := inpod.DefaultConfig()
	if st.Routing, err = inpod.Routing(ns, cfg.RouteTable); err != nil {
		st.Error = err.Error()
	}
}

// inpodLines keeps of iptables-save -c output the table headers and the rules that are
// istio-cni's (in or jumping to its chains).
func inpodLines(saved string) string {
	var b strings.Builder
	for _, line := range strings.Split(saved, "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			b.WriteString(line + "\n")
		case strings.Contains(line, " -A ") && strings.Contains(line, inpod.ChainPrerouting),
			strings.Contains(line, " -A ") && strings.Contains(line, inpod.ChainOutput):
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// ZtunnelAdmin GETs path from the lab's ztunnel's admin (127.0.0.1:15000 in its network
// namespace), for the lab API (ztunnel-config and the like); the caller closes the body.
// A lab that has had no ambient pod runs no ztunnel: ErrNoZtunnel.
func (b below) ZtunnelAdmin(ctx context.Context, path string) (io.ReadCloser, error) {
	l := b.l
	if l.ambient == nil || !l.ambient.ZtunnelStarted() {
		return nil, ErrNoZtunnel
	}
	return ambient.AdminGet(ctx, NamespaceName(l.opts.Name, ztunnelKey(l)), path)
}

// ErrNoZtunnel is asking a lab without ambient pods for its ztunnel.
var ErrNoZtunnel = errors.New("the lab runs no ztunnel: it starts with the lab's first ambient pod (label a namespace istio.io/dataplane-mode=ambient)")
