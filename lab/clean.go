package lab

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/meshlab/meshlab/netns"
)

// Clean removes everything lab name left behind, whether its process exited cleanly, was
// killed with SIGKILL, or is still running (it is killed first): every process it started,
// every process still inside one of its namespaces, its namespaces (and with them every
// link), and its run directory. Clean is idempotent and safe to run on a lab that is gone.
func Clean(root, name string, log *slog.Logger) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	p := PathsFor(root, name)
	var errs []error

	// The lab process first, so it does not restart what we kill.
	if r, err := ReadRecord(p); err == nil && r.PID != os.Getpid() {
		killProcess(r.PID, r.PIDStart, syscall.SIGKILL)
		waitGone(r.PID, r.PIDStart, 2*time.Second)
	}
	entries, err := readJournal(p.Journal())
	if err != nil {
		errs = append(errs, err)
	}
	for _, e := range entries {
		if e.Kind == "process" {
			killProcess(e.PID, e.Start, syscall.SIGKILL)
		}
	}

	namespaces, err := labNamespaces(root, name, entries)
	if err != nil {
		errs = append(errs, err)
	}
	// Anything still inside a lab namespace belongs to the lab (a proxy forked by an agent,
	// a command started with meshlab exec): kill it before the namespace goes.
	for _, ns := range namespaces {
		pids, err := netns.PIDsIn(ns)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, pid := range pids {
			if pid != os.Getpid() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	for _, ns := range namespaces {
		if err := netns.Delete(ns); err != nil {
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
func labNamespaces(root, name string, entries []entry) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, e := range entries {
		if e.Kind == "netns" && !seen[e.Name] {
			seen[e.Name] = true
			out = append(out, e.Name)
		}
	}
	prefix := "ml-" + name + "-"
	all, err := netns.List(prefix)
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

func waitGone(pid int, start uint64, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !processAlive(pid, start) {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return !processAlive(pid, start)
}
