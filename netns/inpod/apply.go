package inpod

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/meshlab/meshlab/netns"
)

// Applier installs and removes the in-pod rules and routing in a pod's namespace.
// Implementations are safe for concurrent use on different namespaces; calls block until
// the kernel has the change.
type Applier interface {
	// Install puts c's rules and routing in the namespace, replacing them atomically if
	// they are there already. c must be valid.
	Install(namespace string, c Config) error
	// InstallNew is Install for a namespace that has never had c's rules (a pod being
	// made): it does not look for them first, and before, the iptables-restore input of
	// the pod's own rules (its cluster DNS), goes into the same iptables-restore run ahead
	// of them, so that a new pod's rules cost one process. before may be empty.
	InstallNew(namespace string, c Config, before string) error
	// Remove takes out what Install put in; it is not an error if they are absent.
	Remove(namespace string, c Config) error
}

var (
	_ Applier = kernelApplier{}
	_ Applier = (*Recorder)(nil)
)

// NewApplier returns the real Applier: iptables-restore --noflush (ip6tables-restore for
// IPv6) and netlink, inside the namespace; InstallNew replays, over netlink, what
// iptables-restore made for the first new pod (replay.go).
func NewApplier() Applier { return kernelApplier{replays: newReplays()} }

type kernelApplier struct{ replays *replays }

func (kernelApplier) Install(namespace string, c Config) error {
	for _, f := range c.Families() {
		has, err := installed(namespace, f)
		if err != nil {
			return err
		}
		text := c.Render(f)
		if has {
			text = c.RenderReplace(f)
		}
		if _, err := runIn(namespace, text, restoreCmd(f), "--noflush"); err != nil {
			return fmt.Errorf("install in-pod rules (%s) in %q: %w", f, namespace, err)
		}
	}
	return installRouting(namespace, c)
}

// InstallNew skips Install's iptables-save: on a new pod that was one of its three
// iptables processes (cluster DNS, the save, the restore), each a fork and exec of the
// lab's and ~15 ms of CPU, which a 100-pod ambient lab paid 300 times at `up`.
// After the first pod, no process at all: the same input's nf_tables batch is replayed.
func (k kernelApplier) InstallNew(namespace string, c Config, before string) error {
	for _, f := range c.Families() {
		text := c.Render(f)
		if f == IPv4 {
			text = before + text
		}
		if err := k.replays.installNew(namespace, f, text); err != nil {
			return fmt.Errorf("install in-pod rules (%s) in %q: %w", f, namespace, err)
		}
	}
	return installRouting(namespace, c)
}

func installRouting(namespace string, c Config) error {
	if err := netns.Do(namespace, func() error { return routing(c, true) }); err != nil {
		return fmt.Errorf("install in-pod routing in %q: %w", namespace, err)
	}
	return nil
}

func (kernelApplier) Remove(namespace string, c Config) error {
	var errs []error
	if err := netns.Do(namespace, func() error { return routing(c, false) }); err != nil {
		errs = append(errs, fmt.Errorf("remove in-pod routing in %q: %w", namespace, err))
	}
	for _, f := range c.Families() {
		has, err := installed(namespace, f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !has {
			continue
		}
		if _, err := runIn(namespace, c.RenderRemove(f), restoreCmd(f), "--noflush"); err != nil {
			errs = append(errs, fmt.Errorf("remove in-pod rules (%s) in %q: %w", f, namespace, err))
		}
	}
	return errors.Join(errs...)
}

// installed reports whether the namespace's nat table has istio-cni's chains.
func installed(namespace string, f Family) (bool, error) {
	out, err := runIn(namespace, "", saveCmd(f), "-t", "nat")
	if err != nil {
		return false, fmt.Errorf("read nat table (%s) in %q: %w", f, namespace, err)
	}
	return bytes.Contains(out, []byte("\n:"+ChainOutput+" ")), nil
}

// routing adds or deletes, in the calling thread's namespace, the rule that looks up
// connection-marked packets in RouteTable and that table's local default route on lo:
// a reply to a connection the node proxy dialled with a spoofed source is addressed to
// a remote client, and this route delivers it locally, to the proxy's socket.
func routing(c Config, add bool) error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("find lo: %w", err)
	}
	var errs []error
	for _, f := range c.Families() {
		family, dst := unix.AF_INET, &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}
		if f == IPv6 {
			family, dst = unix.AF_INET6, &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
		}
		rule := netlink.NewRule()
		rule.Family = family
		rule.Table = c.RouteTable
		rule.Mark = c.ConnMark
		mask := c.ConnMarkMask
		rule.Mask = &mask
		rule.Priority = c.RulePriority
		route := &netlink.Route{Dst: dst, Scope: netlink.SCOPE_HOST, Type: unix.RTN_LOCAL, Table: c.RouteTable, LinkIndex: lo.Attrs().Index}
		if add {
			if err := netlink.RuleAdd(rule); err != nil && !errors.Is(err, unix.EEXIST) {
				errs = append(errs, fmt.Errorf("add rule fwmark %#x/%#x lookup %d (%s): %w", c.ConnMark, c.ConnMarkMask, c.RouteTable, f, err))
			}
			if err := netlink.RouteReplace(route); err != nil {
				errs = append(errs, fmt.Errorf("add local route %s dev lo table %d: %w", dst, c.RouteTable, err))
			}
			continue
		}
		if err := netlink.RuleDel(rule); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("delete rule fwmark %#x/%#x lookup %d (%s): %w", c.ConnMark, c.ConnMarkMask, c.RouteTable, f, err))
		}
		if err := netlink.RouteDel(route); err != nil && !errors.Is(err, unix.ESRCH) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("delete local route %s dev lo table %d: %w", dst, c.RouteTable, err))
		}
	}
	return errors.Join(errs...)
}

// Save returns `iptables-save -c` of the mangle, nat and raw tables in the namespace
// (ip6tables-save for IPv6), with packet counters, for `describe pod`.
func Save(namespace string, f Family) (string, error) {
	var b strings.Builder
	for _, table := range Tables {
		out, err := runIn(namespace, "", saveCmd(f), "-c", "-t", table)
		if err != nil {
			return "", fmt.Errorf("save %s table (%s) in %q: %w", table, f, namespace, err)
		}
		b.Write(out)
	}
	return b.String(), nil
}

// Routing returns the namespace's policy rules and the routes of table, as `ip rule` and
// `ip route show table N` print them, for `describe pod`.
func Routing(namespace string, table int) (string, error) {
	rules, err := runIn(namespace, "", "ip", "rule", "show")
	if err != nil {
		return "", fmt.Errorf("list rules in %q: %w", namespace, err)
	}
	routes, err := runIn(namespace, "", "ip", "route", "show", "table", fmt.Sprint(table))
	if err != nil {
		return "", fmt.Errorf("list routes of table %d in %q: %w", table, namespace, err)
	}
	return string(rules) + string(routes), nil
}

func restoreCmd(f Family) string {
	if f == IPv6 {
		return "ip6tables-restore"
	}
	return "iptables-restore"
}

func saveCmd(f Family) string {
	if f == IPv6 {
		return "ip6tables-save"
	}
	return "iptables-save"
}

// runIn runs a command inside the namespace with stdin, returning its stdout; a failure
// carries the command's stderr.
func runIn(namespace, stdin, name string, args ...string) ([]byte, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := netns.Start(namespace, cmd); err != nil {
		return nil, err
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// Call is one Install, InstallNew or Remove a Recorder saw.
type Call struct {
	Op        string // "install", "install-new" or "remove"
	Namespace string
	Config    Config
	Before    string // InstallNew's pod rules
}

// Recorder is an Applier that only records what it is asked, for --dry-run and tests.
// The zero value is ready to use; set Err to make every call fail after recording.
type Recorder struct {
	Err error // optional

	mu    sync.Mutex
	calls []Call
}

// Install records the call.
func (r *Recorder) Install(namespace string, c Config) error {
	return r.record("install", namespace, c)
}

// InstallNew records the call.
func (r *Recorder) InstallNew(namespace string, c Config, before string) error {
	return r.add(Call{Op: "install-new", Namespace: namespace, Config: c, Before: before})
}

// Remove records the call.
func (r *Recorder) Remove(namespace string, c Config) error { return r.record("remove", namespace, c) }

func (r *Recorder) record(op, namespace string, c Config) error {
	return r.add(Call{Op: op, Namespace: namespace, Config: c})
}

func (r *Recorder) add(c Call) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
	return r.Err
}

// Calls returns a copy of the calls recorded so far, in order.
func (r *Recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Call(nil), r.calls...)
}
