package lab

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/dataplane/agent"
	"github.com/meshlab/meshlab/demoapp"
	"github.com/meshlab/meshlab/lab/podnet"
	"github.com/meshlab/meshlab/netns/capture"
)

// Ports of the pod agent, as pilot-agent's.
const (
	adminPort  = 15000
	statusPort = 15020
	dnsPort    = 15053
)

// podFailure is a pod whose proxy did not become ready while the lab came up.
type podFailure struct {
	Pod string
	Err error
}

// errPodFailed is a pod whose agent gave up on its proxy (Status.Failed).
var errPodFailed = errors.New("proxy failed")

// startPods creates every pod in parallel and waits until each is ready, for at most
// ReadyTimeout. A pod whose proxy fails or is not ready in time does not fail the lab, as
// a crash-looping pod does not fail a Kubernetes deployment: it is reported (progress
// line, event, the returned list) and the rest of the lab keeps working; its agent keeps
// its status for `meshlab describe pod`. Failing to create a pod's namespace or
// processes is an error.
func (l *Lab) startPods(ctx context.Context) ([]podFailure, error) {
	l.agents = newGroup(l.log.With("component", "supervisor"), l.jr, l.syscalls().procs)
	l.apps = newGroup(l.log.With("component", "supervisor"), l.jr, l.syscalls().procs)
	l.agents.publish, l.apps.publish = l.publish, l.publish
	if err := l.allocateAppUIDs(); err != nil {
		return nil, err
	}
	readyCtx, cancel := context.WithTimeout(ctx, l.opts.ReadyTimeout)
	defer cancel()
	l.netSlots = make(chan struct{}, runtime.GOMAXPROCS(0))
	var (
		eg     errgroup.Group
		mu     sync.Mutex
		failed []podFailure
	)
	for _, p := range l.model.Pods {
		slot, err := l.podSlot(p.Key())
		if err != nil {
			return nil, err
		}
		eg.Go(func() error {
			err := l.startPod(readyCtx, slot, p)
			var nr *notReadyError
			if !errors.As(err, &nr) || ctx.Err() != nil {
				return err
			}
			msg := strings.ReplaceAll(nr.Error(), "\n", "\n    ")
			fmt.Fprintf(l.out, "pod %-20s %-15s FAILED: %s\n", p.Key(), p.IP, msg)
			l.publish(EventPodFailed, p.Key(), nr.Error(), map[string]any{"error": nr.Error()})
			mu.Lock()
			failed = append(failed, podFailure{Pod: p.Key(), Err: nr})
			mu.Unlock()
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	slices.SortFunc(failed, func(a, b podFailure) int { return strings.Compare(a.Pod, b.Pod) })
	return failed, nil
}

// startPod creates pod p: its run directory, namespace, link and capture rules (or its
// cluster DNS), its app and agent, and waits until its proxy is ready. slot is its place
// in the lab's app uid block (podSlot).
func (l *Lab) startPod(ctx context.Context, slot int, p *model.Pod) (err error) {
	defer func() { notePodStarted(l, p, err) }() // podready.go: WDS's status of the pod
	start := time.Now()
	dir := l.paths.PodDir(p.Key())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create run directory of pod %s: %w", p.Key(), err)
	}
	if err := l.podNetworks().Make(p.Key(), p.IP, captures(p)); err != nil {
		return err
	}
	var dnsRules string
	if !captures(p) {
		if err := l.serveKubeDNS(p); err != nil {
			return err
		}
		dnsRules = capture.KubeDNSRules(kubeDNSPort)
	}
	// An ambient pod's app starts once its traffic is redirected to ztunnel and ztunnel
	// has it, as istio-cni's CNI plugin holds the pod's sandbox until then (nodeagent.go).
	// When ztunnel does not take it in time the app starts anyway and the pod is reported
	// not ready; ztunnel's next connection takes it.
	var ambientErr error
	inAmbient, installed, err := enrollAmbientPod(l, p, dnsRules)
	if dnsRules != "" && !installed {
		// The pod's DNS goes to its cluster DNS (serveKubeDNS).
		if err := l.syscalls().ns.ApplyRules(NamespaceName(l.opts.Name, p.Key()), dnsRules); err != nil {
			return fmt.Errorf("send the DNS of %s to cluster DNS: %w", p.Key(), err)
		}
	}
	if inAmbient {
		if err == nil {
			err = waitAmbientPod(ctx, l, p, false)
		}
		var nr *notReadyError
		if err != nil && !errors.As(err, &nr) {
			err = &notReadyError{err: err, msg: err.Error()}
		}
		ambientErr = err
	}
	l.publish(EventPodCreated, p.Key(), fmt.Sprintf("pod %s created: namespace %s, %s", p.Key(), NamespaceName(l.opts.Name, p.Key()), p.IP),
		map[string]any{"ip": p.IP.String(), "sidecar": p.Sidecar.Inject})
	ns := NamespaceName(l.opts.Name, p.Key())
	if err := makeEmptyDirs(dir, p); err != nil { // emptydir.go: before the app or agent mounts them
		return fmt.Errorf("pod %s: %w", p.Key(), err)
	}
	startApp := func() error {
		sb, err := l.podSandbox(slot, p)
		if err != nil {
			return err
		}
		if p.Sidecar.GRPCAgent {
			proxylessSandbox(sb, dir) // grpcagent.go
		}
		argv := l.appArgv(p)
		if prom, ok, err := prometheusApp(l, p, sb); err != nil { // promaddon.go
			return err
		} else if ok {
			argv = prom
		}
		if p.App.Persona == demoapp.PersonaKiali {
			writeKialiServices(l) // kialiaddon.go: after its volume files
		}
		if filepath.Base(argv[0]) == SmallAppName {
			// It links the pod init and becomes the app in it: the pod is one process,
			// PID 1 of its PID namespace, as a container's process is.
			sb.Init, sb.InProcess = argv[0], true
		}
		return l.apps.start(processSpec{
			Role: "app", Pod: p.Key(), NetNS: ns, Argv: argv, Sandbox: sb,
			LogPath: dir + "/app.log", Grace: 5 * time.Second,
		})
	}
	// A pod that does not hold its app starts it first: kubelet starts a pod's containers
	// without waiting for the sidecar's config, and Envoy needs its first xDS push before it
	// listens, so in Kubernetes the app's first calls find a sidecar without listeners. Going
	// first makes that race come out the same way every time here, even on a loaded machine
	// where the app's own start could be slower than the agent's.
	// A proxyless pod's app waits for its agent's bootstrap and certificates (grpcagent.go).
	held := p.Sidecar.Inject && (p.Sidecar.HoldApplicationUntilProxyStarts || p.Sidecar.GRPCAgent)
	if !held && !p.Router { // a gateway's proxy is its only process (gateways.go)
		if err := startApp(); err != nil {
			return err
		}
	}
	if p.Sidecar.Inject {
		if err := l.writePodToken(p); err != nil {
			return err
		}
		if len(p.Sidecar.Files) > 0 {
			// The istio-proxy container's user volumes (sandbox.go's podVolumeRoot for the
			// app's): the agent reads the certificate files a Sidecar names there.
			if err := writeVolumeFiles(proxyVolumeRoot(dir), p.Sidecar.Files, ProxyUID); err != nil {
				return fmt.Errorf("sidecar volumes of pod %s: %w", p.Key(), err)
			}
		}
		argv := append([]string{l.opts.MeshlabPath, "agent", "--log-level=info"}, agent.Args(l.agentConfig(slot, p))...)
		err := l.agents.start(processSpec{
			Role: "agent", Pod: p.Key(), NetNS: ns, Argv: argv, LogPath: dir + "/agent.log",
			Env:   agent.StartupGCEnv(), // its collector paused until its proxy is LIVE
			Grace: l.opts.TerminationDrain + 10*time.Second,
		})
		if err != nil {
			return err
		}
	}
	if held && !p.Router {
		if err := l.waitReady(ctx, p.Key()); err != nil {
			return err
		}
		if err := startApp(); err != nil {
			return err
		}
	}
	if p.Sidecar.Inject {
		if err := l.waitReady(ctx, p.Key()); err != nil {
			return err
		}
	}
	if inAmbient && ambientErr == nil {
		// Ready once the control plane has its annotation too, which the app did not wait for.
		ambientErr = waitAmbientPod(ctx, l, p, true)
	}
	if ambientErr != nil {
		return ambientErr
	}
	took := time.Since(start).Round(time.Millisecond)
	l.publish(EventPodReady, p.Key(), fmt.Sprintf("pod %s ready in %s", p.Key(), took), map[string]any{"ms": took.Milliseconds()})
	fmt.Fprintf(l.out, "pod %-20s %-15s ready in %s\n", p.Key(), p.IP, took)
	return nil
}

// agentConfig is the configuration of pod p's agent; slot (podSlot) numbers its
// proxy's --base-id.
func (l *Lab) agentConfig(slot int, p *model.Pod) agent.Config {
	td := "" // the agent's default, cluster.local
	if l.ca != nil {
		// The injector's TRUST_DOMAIN: the mesh config's when the pod is made, which
		// the CA follows (apply.go's commit).
		td = l.ca.Authority().TrustDomain()
	}
	return agent.Config{
		Lab:                      l.opts.Name,
		Pod:                      p.Name,
		Namespace:                p.Namespace,
		PodIP:                    p.IP,
		NodeID:                   p.NodeID(),
		ServiceCluster:           p.ServiceCluster(),
		Workload:                 p.Workload,
		Labels:                   p.Labels,
		ServiceAccount:           p.ServiceAccount,
		RunDir:                   l.paths.PodDir(p.Key()),
		XDSSocket:                l.paths.XDSSocket(),
		LabSocket:                l.paths.APISocket(),
		ProxyPath:                cmp.Or(p.Sidecar.ProxyPath, l.opts.ProxyPath),
		MeshlabPath:              l.opts.MeshlabPath,
		ProxyUID:                 ProxyUID,
		ProxyGID:                 ProxyUID,
		BaseID:                   baseID(l.opts.Name, slot),
		LogLevel:                 p.Sidecar.LogLevel,
		Concurrency:              p.Sidecar.Concurrency,
		DrainDuration:            p.Sidecar.DrainDuration,
		ParentShutdownDuration:   p.Sidecar.ParentShutdownDuration,
		DataPlane:                p.Sidecar.DataPlane,
		BootstrapOverride:        p.Sidecar.BootstrapOverride,
		TokenPath:                l.tokenPath(p.Key()),
		SystemCAFile:             l.worldTrustBundle(),
		CertTTL:                  l.opts.CertTTL,
		TerminationDrainDuration: l.opts.TerminationDrain,
		AdminPort:                adminPort,
		StatusPort:               statusPort,
		DNSPort:                  dnsPort,
		Proxyless:                p.Sidecar.GRPCAgent,
		AppUID:                   l.rec.AppUIDBase + uint32(slot),
		AppMetricsPort:           p.Sidecar.AppMetricsPort,
		AppMetricsPath:           p.Sidecar.AppMetricsPath,
		TrustDomain:              td,
		VolumeRoot:               proxyVolumeRootOf(l.paths.PodDir(p.Key()), p),
		OutputCerts:              outputCertsDir(l.paths.PodDir(p.Key()), p), // emptydir.go
		SecureMetricsPort:        p.Sidecar.SecureMetricsPort,
		SecureMergedMetricsPort:  p.Sidecar.SecureMergedMetricsPort,
		MetricsLocalhostOnly:     p.Sidecar.MetricsLocalhostOnly,
		// The proxy config pilot-agent reads when the pod starts: the bootstrap's
		// Zipkin tracer (the pod's proxy.istio.io/config tracing, else the mesh's
		// defaultConfig.tracing; a later change needs a restart).
		ZipkinAddress: l.model.Mesh.Tracing.For(p).ZipkinAddress,
		// HOST_IP: the lab's node address, its pods' gateway on the bridge.
		HostIP: podnet.Gateway(l.opts.PodCIDR).Addr().String(),
	}
}

// proxyVolumeRoot is where the files of a pod's sidecar user volumes are written, each
// at its path in the istio-proxy container below it.
func proxyVolumeRoot(podDir string) string { return filepath.Join(podDir, "proxy-volumes") }

// proxyVolumeRootOf is proxyVolumeRoot for a pod whose sidecar has volume files, else "".
func proxyVolumeRootOf(podDir string, p *model.Pod) string {
	if len(p.Sidecar.Files) == 0 {
		return ""
	}
	return proxyVolumeRoot(podDir)
}

func (l *Lab) appArgv(p *model.Pod) []string {
	if len(p.App.Command) > 0 {
		return p.App.Command
	}
	svc := p.Labels["app"]
	if ss := l.model.ServicesFor(p); len(ss) > 0 {
		svc = ss[0].Name
	}
	cfg := demoapp.Config{
		Service:      svc,
		Pod:          p.Name,
		Namespace:    p.Namespace,
		Version:      p.Labels["version"],
		Ports:        p.Ports,
		Upstreams:    p.App.Upstreams,
		StartupCalls: p.App.StartupCalls,
		ErrorRate:    p.App.ErrorRate,
		ErrorCode:    p.App.ErrorCode,
		Latency:      p.App.Latency,
		Persona:      p.App.Persona,
		PersonaArgs:  personaArgs(p.App),
	}
	if len(p.App.Files) > 0 && (p.App.Persona == demoapp.PersonaNginx || p.App.Persona == demoapp.PersonaSquid || p.App.Persona == demoapp.PersonaGrafana || p.App.Persona == demoapp.PersonaKiali) {
		cfg.VolumeRoot = podVolumeRoot(l.paths.PodDir(p.Key())) // sandbox.go
	}
	if app := smallApp(l.opts.MeshlabPath); app != "" && !demoapp.LinksAll(cfg.Persona) {
		return append([]string{app}, demoapp.Args(cfg)...)
	}
	return append([]string{l.opts.MeshlabPath, "app"}, demoapp.Args(cfg)...)
}

// SmallAppName is the built-in app's small binary (cmd/meshlab-app), which the lab runs
// for a pod's app when it sits beside the meshlab binary: `meshlab app` without the one
// binary's package init, ~1.4 MB of its own memory and a few ms of start CPU against
// ~6.6 MB and ~17 ms (docs/ARCHITECTURE.md, "Processes per pod").
const SmallAppName = "meshlab-app"

// smallApp is the small app binary beside meshlab, "" when there is none the apps' uids
// can run (the lab then runs `meshlab app`).
func smallApp(meshlab string) string {
	p := filepath.Join(filepath.Dir(meshlab), SmallAppName)
	if checkExecutableByApps(p) != nil {
		return ""
	}
	return p
}

// notReadyError is a pod whose proxy failed or was not ready in time.
// pushError is a *notReadyError when the control plane could not generate the config
// of pod's proxy (discovery.Server.PushError): the proxy has none to become ready with
// until a later update generates it, so `up` reports the pod at once instead of at the
// ready timeout. A function, not a method: *Lab's method set is bounded.
func pushError(l *Lab, pod string) error {
	m := l.below().Model()
	if l.disc == nil || m == nil || m.Pod(pod) == nil {
		return nil
	}
	msg := l.disc.PushError(m.Pod(pod).NodeID())
	if msg == "" {
		return nil
	}
	return &notReadyError{err: errPodFailed, msg: "its proxy's config was not generated: " + msg}
}

type notReadyError struct {
	msg string
	err error // errPodFailed or context.DeadlineExceeded
}

func (e *notReadyError) Error() string { return e.msg }
func (e *notReadyError) Unwrap() error { return e.err }

// Waiting for a pod's readiness: the agent answers GET /status?wait=ready when its proxy
// becomes ready or fails (a push by long poll, dataplane/agent's sock.go; agentapi.Client.WaitReady), for at most
// readyLongPoll. An agent that is not listening yet, or one that answers at once without
// waiting (proxyless pods, an older agent), is asked again after a backoff from
// readyRetryFirst doubling to readyRetryLast: a bounded fallback, not a 20 ms poll.
const (
	readyLongPoll   = 30 * time.Second
	readyRetryFirst = 10 * time.Millisecond
	readyRetryLast  = 250 * time.Millisecond
)

// waitReady waits until the pod's agent reports ready. It returns a *notReadyError at
// once when the agent reports its proxy failed (a binary that cannot start, a crash
// loop) or the control plane could not generate its config (pushError), or when ctx's
// deadline passes.
func (l *Lab) waitReady(ctx context.Context, pod string) error {
	c := l.agentClient(pod)
	defer c.Close()
	var last string
	retry := readyRetryFirst
	name := pod
	if m := l.below().Model(); m != nil {
		if p := m.Pod(pod); p != nil {
			name = p.Name
		}
	}
	for {
		if err := pushError(l, pod); err != nil {
			return err
		}
		offer := l.podview.Before(pod, name) // the pod list holds what the agent answers
		// The agent answers a little before ctx's deadline, so a pod that is not ready
		// in time is reported with the agent's reason.
		wait := readyLongPoll
		if d, ok := ctx.Deadline(); ok {
			wait = max(min(wait, time.Until(d)*9/10), readyRetryFirst).Round(time.Millisecond)
		}
		asked := time.Now()
		st, err := c.WaitReady(ctx, wait)
		if err == nil && st.Ready {
			offer(st)
			return nil
		}
		if err == nil {
			last = st.Message
			if st.Failed {
				return &notReadyError{err: errPodFailed,
					msg: fmt.Sprintf("%s (see %s)", failureReason(st.Message), l.paths.PodDir(pod))}
			}
			if time.Since(asked) >= wait/2 {
				retry = 0 // the agent held the request: it pushes, ask again at once
			}
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				msg := fmt.Sprintf("not ready within %s", l.opts.ReadyTimeout)
				if last != "" {
					msg += ": " + failureReason(last)
				}
				return &notReadyError{err: ctx.Err(), msg: fmt.Sprintf("%s (see %s)", msg, l.paths.PodDir(pod))}
			}
			return ctx.Err()
		case <-time.After(retry):
		}
		retry = min(max(2*retry, readyRetryFirst), readyRetryLast)
	}
}

// upSummary is the line `up` ends with: "lab x is up: 3 pods ready in 312ms", or with
// failed pods "lab x is up: 2 of 3 pods ready in 1.2s; failed: backend-v2 (meshlab
// describe pod backend-v2)".
func upSummary(lab string, pods int, failed []podFailure, took time.Duration) string {
	if len(failed) == 0 {
		return fmt.Sprintf("lab %s is up: %d pods ready in %s", lab, pods, took)
	}
	names := make([]string, len(failed))
	for i, f := range failed {
		names[i] = f.Pod
	}
	return fmt.Sprintf("lab %s is up: %d of %d pods ready in %s; failed: %s (meshlab describe pod %s)",
		lab, pods-len(failed), pods, took, strings.Join(names, ", "), names[0])
}

// maxReasonLines bounds the lines of a failed pod's reason in `up`'s progress output;
// `meshlab describe pod` has them all.
const maxReasonLines = 4

// failureReason is the part of a failed agent's status message that says why: from its
// last unexpected proxy exit (the "not ready" part only says that no proxy runs), without
// repeated lines; of a long one, the first line (the error) and the last lines (a
// proxy's last stderr lines say why it exited).
func failureReason(msg string) string {
	const exitPrefix = "last unexpected proxy exit: "
	if i := strings.Index(msg, exitPrefix); i >= 0 {
		msg = msg[i+len(exitPrefix):]
	}
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(msg), "\n") {
		dup := slices.ContainsFunc(lines, func(seen string) bool { return strings.HasSuffix(seen, line) })
		if line != "" && !dup {
			lines = append(lines, line)
		}
	}
	if len(lines) > maxReasonLines {
		lines = append([]string{lines[0], "..."}, lines[len(lines)-maxReasonLines+1:]...)
	}
	return strings.Join(lines, "\n")
}

// personaArgs are the container args the app's persona reads (tcp-echo's ports and
// prefix); other personas and the demo app take none.
func personaArgs(app model.AppSpec) []string {
	if app.Persona != demoapp.PersonaTCPEcho {
		return nil
	}
	return app.Args
}
