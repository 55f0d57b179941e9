package capture

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"sync"

	"github.com/meshlab/meshlab/netns"
)

// Applier installs rendered rules in a pod's network namespace.
// Implementations are safe for concurrent use; Apply blocks until the rules are in place.
type Applier interface {
	// Apply replaces the namespace's nat table with rules (iptables-restore input).
	Apply(namespace, rules string) error
}

var (
	_ Applier = restoreApplier{}
	_ Applier = (*Recorder)(nil)
)

// NewApplier returns the real Applier: it runs iptables-restore inside the namespace.
// It does not pass --noflush: the pod namespace is meshlab's own and fresh, and replacing
// the whole table makes applying the same rules twice harmless.
func NewApplier() Applier { return restoreApplier{} }

type restoreApplier struct{}

func (restoreApplier) Apply(namespace, rules string) error {
	if _, err := runIn(namespace, rules, "iptables-restore"); err != nil {
		return fmt.Errorf("apply capture rules in %q: %w", namespace, err)
	}
	return nil
}

// Save returns `iptables-save -c -t nat` output from the namespace (packet counters for the dashboard).
func Save(namespace string) (string, error) {
	out, err := runIn(namespace, "", "iptables-save", "-c", "-t", TableNAT)
	if err != nil {
		return "", fmt.Errorf("save nat table in %q: %w", namespace, err)
	}
	return string(out), nil
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

// Applied is one Apply call a Recorder saw.
type Applied struct{ Namespace, Rules string }

// Recorder is an Applier that only records what it is asked to apply, for --dry-run and
// tests. The zero value is ready to use; set Err to make every Apply fail.
type Recorder struct {
	Err error // optional: returned by Apply after recording

	mu      sync.Mutex
	applied []Applied
}

// Apply records the call and returns r.Err.
func (r *Recorder) Apply(namespace, rules string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.applied = append(r.applied, Applied{Namespace: namespace, Rules: rules})
	return r.Err
}

// Applied returns a copy of the calls recorded so far, in order.
func (r *Recorder) Applied() []Applied {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Applied(nil), r.applied...)
}
