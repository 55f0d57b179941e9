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
	if r, err := ReadRecord(p); err == nil && processAlive(r.PID, r.PIDStart) {
		signalIfAlive(host.procs, r.PID, r.PIDStart, syscall.SIGTERM)
		if !waitGone(host.procs, r.PID, r.PIDStart, timeout) {
			log.Warn("lab process did not stop in time; cleaning up by force", "pid", r.PID)
		}
	}
	return Clean(root, name, log)
}
