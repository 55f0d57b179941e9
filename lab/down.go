package lab

import (
	"log/slog"
	"os"
	"syscall"
	"time"
)

// Down stops lab name: it asks the lab process to stop (SIGTERM, as Ctrl-C does), waits up
// to timeout for it to remove everything, then cleans whatever is left. A lab whose process
// is already gone is cleaned.
func Down(root, name string, timeout time.Duration, log *slog.Logger) error {
	return down(host, root, name, timeout, log)
}

// down is Down on the system sys.
func down(sys system, root, name string, timeout time.Duration, log *slog.Logger) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	p := PathsFor(root, name)
	if _, err := os.Stat(p.Dir); os.IsNotExist(err) {
		known, err := Known(root)
		if err != nil {
			return err
		}
		return &NoSuchLabError{Name: name, Known: known}
	}
	if r, err := ReadRecord(p); err == nil && sys.procs.Alive(r.PID, r.PIDStart) {
		_ = sys.procs.Signal(r.PID, syscall.SIGTERM)
		if !waitGone(sys.procs, r.PID, r.PIDStart, timeout) {
			log.Warn("lab process did not stop in time; cleaning up by force", "pid", r.PID)
		}
	}
	return clean(sys, root, name, log)
}
