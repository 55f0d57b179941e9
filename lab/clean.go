package lab

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/meshlab/meshlab/netns"
)

// Clean removes everything lab name left behind, whether its process exited cleanly, was
// killed with SIGKILL, or is still running (it is killed first): every process it started,
// every process still inside one of its namespaces, its namespaces (and with them every
// link), and its run directory. Clean is idempotent and safe to run on a lab that is gone.
func Clean(root, name string, log *slog.Logger) error { return clean(host, root, name, log) }

// clean is Clean on the system sys.
func clean(sys system, root, name string, log *slog.Logger) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	p := PathsFor(root, name)
	var errs []error

	// The lab process first, so it does not restart what we kill.
	if r, err := ReadRecord(p); err == nil && r.PID != os.Getpid() {
		signalIfAlive(sys.procs, r.PID, r.PIDStart, syscall.SIGKILL)
		waitGone(sys.procs, r.PID, r.PIDStart, 2*time.Second)
	}
	entries, err := readJournal(p.Journal())
	if err != nil {
		errs = append(errs, err)
	}
	for _, e := range entries {
		if e.Kind == "process" {
			signalIfAlive(sys.procs, e.PID, e.Start, syscall.SIGKILL)
		}
	}

	namespaces, err := labNamespaces(sys.ns, root, name, entries)
	if err != nil {
		errs = append(errs, err)
	}
	// Anything still inside a lab namespace belongs to the lab (a proxy forked by an agent,
	// a command started with meshlab exec): kill it before the namespace goes.
	inside, err := sys.procs.PIDsInEach(namespaces) // one pass over the processes
	if err != nil {
		errs = append(errs, err)
	}
	for _, ns := range namespaces {
		for _, pid := range inside[ns] {
			if pid != os.Getpid() {
				_ = sys.procs.Signal(pid, syscall.SIGKILL)
			}
		}
	}
	for _, ns := range namespaces {
		if err := sys.ns.Delete(ns); err != nil {
			errs = append(errs, fmt.Errorf("delete namespace %s: %w", ns, err))
		} else {
			log.Debug("deleted namespace", "netns", ns)
		}
	}
	if err := os.RemoveAll(p.Dir); err != nil {
		errs = append(errs, fmt.Errorf("remove run directory: %w", err))
	}
	return errors.Join(errs...)
}

// labNamespaces returns the namespaces of lab name: those in its journal, plus any
// "ml-<name>-*" namespace that no other lab's journal claims (lab "a" must not take
// "ml-a-b-node" of lab "a-b").
func labNamespaces(nss namespaces, root, name string, entries []entry) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, e := range entries {
		switch {
		case e.Kind == "netns" && !seen[e.Name]:
			seen[e.Name] = true
			out = append(out, e.Name)
		case e.Kind == entryNetNSDeleted && seen[e.Name]:
			// A pod the running lab removed (livepods.go); should its deletion have
			// failed, the scan for ml-<name>-* below still finds it.
			delete(seen, e.Name)
			out = slices.DeleteFunc(out, func(ns string) bool { return ns == e.Name })
		}
	}
	prefix := "ml-" + name + "-"
	all, err := nss.List(prefix)
	if err != nil {
		return out, err
	}
	others := map[string]bool{}
	labs, _ := Known(root)
	for _, l := range labs {
		if l == name || !strings.HasPrefix("ml-"+l+"-", prefix) {
			continue
		}
		es, _ := readJournal(PathsFor(root, l).Journal())
		for _, e := range es {
			if e.Kind == "netns" {
				others[e.Name] = true
			}
		}
		if r, err := ReadRecord(PathsFor(root, l)); err == nil {
			for _, pr := range r.Pods {
				others[pr.NetNS] = true
			}
			others[NodeNamespace(l)] = true
			others[WorldNamespace(l)] = true
		}
	}
	for _, ns := range all {
		if !seen[ns] && !others[ns] {
			seen[ns] = true
			out = append(out, ns)
		}
	}
	return out, nil
}

// ErrLabRunning is returned by CheckClean for a lab whose process is alive.
var ErrLabRunning = errors.New("lab is running")

// NoSuchLabError is a lab name that names nothing: no run directory and no namespace.
// It lists the labs that do exist, and wraps ErrNoLab.
type NoSuchLabError struct {
	Name  string
	Known []string // labs present under the run root, sorted
}

func (e *NoSuchLabError) Error() string {
	if len(e.Known) == 0 {
		return fmt.Sprintf("no lab %q: no lab is present", e.Name)
	}
	return fmt.Sprintf("no lab %q: labs present: %s", e.Name, strings.Join(e.Known, ", "))
}

func (e *NoSuchLabError) Unwrap() error { return ErrNoLab }

// CheckClean decides whether `meshlab clean` may clean lab name: it must have left
// something behind (a run directory or a namespace), else the error is a *NoSuchLabError;
// and, unless force, its process must be gone: clean is for after a crash, `down` stops a
// running lab (ErrLabRunning, with the pid).
func CheckClean(root, name string, force bool) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	p := PathsFor(root, name)
	if _, err := os.Stat(p.Dir); errors.Is(err, os.ErrNotExist) {
		left, err := netns.List("ml-" + name + "-")
		if err != nil {
			return err
		}
		if len(labOwnNamespaces(root, name, left)) == 0 {
			known, err := Known(root)
			if err != nil {
				return err
			}
			return &NoSuchLabError{Name: name, Known: known}
		}
		return nil
	}
	if r, err := ReadRecord(p); err == nil && !force && processAlive(r.PID, r.PIDStart) {
		return fmt.Errorf("lab %q (pid %d): %w: stop it with meshlab down --name %s, or kill it and remove everything with meshlab clean --force --name %s",
			name, r.PID, ErrLabRunning, name, name)
	}
	return nil
}

// labOwnNamespaces keeps the names of left that belong to lab name and to no other lab
// with a longer name sharing its prefix.
func labOwnNamespaces(root, name string, left []string) []string {
	var out []string
	others, _ := Known(root)
	for _, ns := range left {
		mine := true
		for _, o := range others {
			if o != name && strings.HasPrefix(o, name+"-") && strings.HasPrefix(ns, "ml-"+o+"-") {
				mine = false
			}
		}
		if mine {
			out = append(out, ns)
		}
	}
	return out
}

// Skipped is a lab `clean --all` leaves alone, and why.
type Skipped struct {
	Name   string
	Reason string
}

// CleanableBy splits the labs under root for `clean --all` run by uid: those whose record
// says uid made them and whose process is gone (or any, with force), and the others with
// the reason each is left alone (made by another user, no record of its creator, running).
func CleanableBy(root string, uid uint32, force bool) (mine []string, skipped []Skipped, err error) {
	names, err := Known(root)
	if err != nil {
		return nil, nil, err
	}
	for _, n := range names {
		p := PathsFor(root, n)
		r, err := ReadRecord(p)
		switch {
		case err != nil:
			skipped = append(skipped, Skipped{n, "no record of who made it (" + err.Error() + "); clean it by name"})
		case r.CreatorUID == nil:
			skipped = append(skipped, Skipped{n, "its record does not say who made it; clean it by name"})
		case *r.CreatorUID != uid:
			skipped = append(skipped, Skipped{n, fmt.Sprintf("made by uid %d, not uid %d", *r.CreatorUID, uid)})
		case !force && processAlive(r.PID, r.PIDStart):
			skipped = append(skipped, Skipped{n, fmt.Sprintf("running (pid %d): stop it with meshlab down --name %s, or use --force", r.PID, n)})
		default:
			mine = append(mine, n)
		}
	}
	return mine, skipped, nil
}

// waitGone waits up to d for pid (started at start) to be gone, and reports whether it is.
func waitGone(p processes, pid int, start uint64, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !p.Alive(pid, start) {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return !p.Alive(pid, start)
}
