package netns

import (
	"fmt"
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// Start starts cmd (an *exec.Cmd not yet started) inside the named namespace: fork/exec
// from a locked thread that has joined the namespace, so the child and all its threads
// live there. The caller waits for cmd as usual.
func Start(name string, cmd *exec.Cmd) error {
	err := Do(name, func() error {
		// os/exec forks from the calling thread, which Do has locked into the namespace.
		return cmd.Start()
	})
	if err != nil {
		return fmt.Errorf("start %s in netns %q: %w", cmd.Path, name, err)
	}
	return nil
}

// Exec replaces the current process with argv (argv[0] looked up in PATH) inside the
// namespace (used by `meshlab exec`; it never returns on success). When a sandboxed app
// runs in the namespace, argv runs as `kubectl exec` runs a command in a container: in
// the app's namespaces, as its uid, with its restrictions (ExecInPod). Otherwise it runs
// as ExecPrivileged does.
func Exec(name string, argv []string, env []string) error {
	if len(argv) == 0 {
		return fmt.Errorf("exec in netns %q: empty command", name)
	}
	if pid, sb, ok, err := PodInit(name); err != nil {
		return fmt.Errorf("exec in netns %q: %w", name, err)
	} else if ok {
		return ExecInPod(pid, sb, argv, env)
	}
	return ExecPrivileged(name, argv, env)
}

// ExecPrivileged replaces the current process with argv run as the caller (root, with its
// capabilities: `meshlab exec --privileged`, for iptables-save and the like) in the
// network namespace only, like `ip netns exec` but without remounting /sys or binding
// /etc/netns/<name>: a Go process is multi-threaded, and a mount namespace cannot be
// unshared by one of several threads.
func ExecPrivileged(name string, argv []string, env []string) error {
	if len(argv) == 0 {
		return fmt.Errorf("exec in netns %q: empty command", name)
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return fmt.Errorf("exec in netns %q: %w", name, err)
	}
	target, err := openNamespace(name)
	if err != nil {
		return err
	}
	defer unix.Close(target)
	origin, err := unix.Open(threadNSPath(), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open current netns: %w", err)
	}
	defer unix.Close(origin)

	// execve keeps only the calling thread, with its namespaces: lock it, enter, exec.
	runtime.LockOSThread()
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter netns %q: %w", name, err)
	}
	execErr := syscall.Exec(path, argv, env)
	if err := unix.Setns(origin, unix.CLONE_NEWNET); err != nil {
		// The thread stays locked; the caller's goroutine keeps the tainted thread.
		return fmt.Errorf("exec %s in netns %q: %w (and restore netns: %w)", path, name, execErr, err)
	}
	runtime.UnlockOSThread()
	return fmt.Errorf("exec %s in netns %q: %w", path, name, execErr)
}
