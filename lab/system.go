package lab

import (
	"net"
	"net/netip"
	"os"
	"os/exec"
	"syscall"

	"github.com/meshlab/meshlab/netns"
	"github.com/meshlab/meshlab/netns/capture"
	"github.com/meshlab/meshlab/netns/kubeproxy"
)

// system is the kernel and the other processes as creating and removing a lab reach
// them: namespaces with their links, rules and listeners, the processes the lab starts,
// and signals. host is the real one; the unit tests of Start, of its network and of
// Clean give a recorder (system_test.go) and compare what it was asked, as netns's plans
// are compared with their recorder.
type system struct {
	ns    namespaces
	procs processes
	// proxyGID is the group the lab gives the sockets its proxies connect to (xds.sock):
	// ProxyUID on the host.
	proxyGID int
}

// namespaces are the lab's network namespaces. Calls are independent; an implementation
// is safe for concurrent use.
type namespaces interface {
	// List lists the named namespaces whose names start with prefix.
	List(prefix string) ([]string, error)
	// Delete removes the named namespace, and with it every link inside it.
	Delete(name string) error
	// SetupNode creates the node namespace with its bridge; SetupPod creates a pod's
	// namespace with its veth on that bridge (netns's plans), and with c.AllowLowPorts
	// lets every uid in it bind any port, as container runtimes do for Kubernetes pods
	// (net.ipv4.ip_unprivileged_port_start=0).
	SetupNode(c netns.NodeConfig) error
	SetupPod(c netns.PodConfig) error
	// ApplyRules installs iptables-restore rules in the namespace.
	ApplyRules(name, rules string) error
	// PrepareNode makes the node namespace forward service traffic (kube-proxy's
	// sysctls and the route of the service CIDR to the bridge dev).
	PrepareNode(name string, serviceCIDR netip.Prefix, dev string) error
	// SetupWorld creates the lab's outside world: its namespace, link to the node and
	// the hosts' addresses (netns's plan).
	SetupWorld(c netns.WorldConfig) error
	// Listen and ListenPacket listen on address inside the named namespace (the outside
	// world's hosts, a plain pod's cluster DNS).
	Listen(ns, network, address string) (net.Listener, error)
	ListenPacket(ns, network, address string) (net.PacketConn, error)
}

// processes are the processes a lab started or that run in its namespaces.
type processes interface {
	// Start starts spec's process inside its namespace (as its uid, or sandboxed), its
	// output appended to out, in a process group of its own; it returns once the
	// process runs.
	Start(spec processSpec, out *os.File) (proc, error)
	// PIDsIn lists the processes inside the named network namespace.
	PIDsIn(ns string) ([]int, error)
	// PIDsInEach is PIDsIn of each namespace, by name, in one pass.
	PIDsInEach(ns []string) (map[string][]int, error)
	// Alive reports whether pid runs and is the process that started at start (0: any);
	// zombies are dead.
	Alive(pid int, start uint64) bool
	// Signal sends sig to pid.
	Signal(pid int, sig syscall.Signal) error
}

// proc is one process a lab started.
type proc interface {
	// PID is its process id.
	PID() int
	// Wait blocks until it has exited and says how; call it once.
	Wait() error
	// Signal sends it sig; it may be called while Wait blocks.
	Signal(sig syscall.Signal) error
}

// host is the real system.
var host = system{ns: hostNamespaces{}, procs: hostProcesses{}, proxyGID: ProxyUID}

// syscalls is the system the lab runs on: Lab.sys, or the host for a Lab made without
// one (the bare Labs of unit tests).
func (l *Lab) syscalls() system {
	if l.sys.ns == nil || l.sys.procs == nil {
		return host
	}
	return l.sys
}

// hostNamespaces are namespaces through package netns.
type hostNamespaces struct{}

var _ namespaces = hostNamespaces{}

func (hostNamespaces) List(prefix string) ([]string, error) { return netns.List(prefix) }
func (hostNamespaces) Delete(name string) error             { return netns.Delete(name) }
func (hostNamespaces) SetupNode(c netns.NodeConfig) error   { return netns.SetupNode(c) }
func (hostNamespaces) SetupPod(c netns.PodConfig) error     { return netns.SetupPod(c) }

func (hostNamespaces) ApplyRules(name, rules string) error {
	return capture.NewApplier().Apply(name, rules)
}

func (hostNamespaces) PrepareNode(name string, serviceCIDR netip.Prefix, dev string) error {
	return kubeproxy.PrepareNode(name, serviceCIDR, dev)
}

func (hostNamespaces) SetupWorld(c netns.WorldConfig) error { return netns.SetupWorld(c) }

func (hostNamespaces) Listen(ns, network, address string) (net.Listener, error) {
	var ln net.Listener
	err := netns.Do(ns, func() error {
		var err error
		ln, err = net.Listen(network, address)
		return err
	})
	return ln, err
}

func (hostNamespaces) ListenPacket(ns, network, address string) (net.PacketConn, error) {
	var pc net.PacketConn
	err := netns.Do(ns, func() error {
		var err error
		pc, err = net.ListenPacket(network, address)
		return err
	})
	return pc, err
}

// hostProcesses are processes through /proc and kill(2).
type hostProcesses struct{}

var _ processes = hostProcesses{}

func (hostProcesses) Start(spec processSpec, out *os.File) (proc, error) {
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/"}, spec.Env...)
	// Its own process group, so a Ctrl-C at the lab's terminal reaches only the lab process,
	// which then stops everything in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	startIn := netns.Start
	switch {
	case spec.Sandbox != nil:
		startIn = func(ns string, cmd *exec.Cmd) error { return netns.StartSandboxed(ns, cmd, *spec.Sandbox) }
	case spec.UID != 0:
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: spec.UID, Gid: spec.UID}
	}
	if err := startIn(spec.NetNS, cmd); err != nil {
		return nil, err
	}
	return hostProc{cmd}, nil
}

// hostProc is a process started by exec.
type hostProc struct{ cmd *exec.Cmd }

func (p hostProc) PID() int                        { return p.cmd.Process.Pid }
func (p hostProc) Wait() error                     { return p.cmd.Wait() }
func (p hostProc) Signal(sig syscall.Signal) error { return syscall.Kill(p.cmd.Process.Pid, sig) }

func (hostProcesses) PIDsIn(ns string) ([]int, error) { return netns.PIDsIn(ns) }
func (hostProcesses) PIDsInEach(ns []string) (map[string][]int, error) {
	return netns.PIDsInEach(ns)
}
func (hostProcesses) Alive(pid int, start uint64) bool         { return processAlive(pid, start) }
func (hostProcesses) Signal(pid int, sig syscall.Signal) error { return syscall.Kill(pid, sig) }

// signalIfAlive sends sig to pid if it is still the process that started at start.
func signalIfAlive(p processes, pid int, start uint64, sig syscall.Signal) {
	if p.Alive(pid, start) {
		_ = p.Signal(pid, sig)
	}
}
