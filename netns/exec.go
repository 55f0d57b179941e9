package netns

import (
	"fmt"
	"os"
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

// Run runs argv in the named namespace as Exec would become it (in a sandboxed app's
// namespaces as its uid, through nsenter; else in the network namespace only, as root, as
// with privileged), but as a child of the caller, and waits for it: `meshlab exec` ends
// as kubectl exec does (the command's exit code, reported) without a second meshlab
// process to become the command. prepare sets up cmd before it starts (its stdio,
// SysProcAttr); started gets its process once it runs (to pass it signals). The child is
// forked from a thread held locked until it exits, so a Pdeathsig that prepare sets
// holds for the whole run. The error is cmd.Wait's (an *exec.ExitError for a command
// that ran and failed), or why it did not start.
func Run(name string, argv, env []string, privileged bool, prepare func(*exec.Cmd), started func(*os.Process)) error {
	if len(argv) == 0 {
		return fmt.Errorf("run in netns %q: empty command", name)
	}
	run := func(cmd *exec.Cmd) error {
		prepare(cmd)
		if err := cmd.Start(); err != nil {
			return err
		}
		started(cmd.Process)
		return cmd.Wait()
	}
	if !privileged {
		pid, sb, ok, err := PodInit(name)
		if err != nil {
			return fmt.Errorf("run in netns %q: %w", name, err)
		}
		if ok {
			cmd, err := podCommand(pid, sb, argv, env)
			if err != nil {
				return err
			}
			runtime.LockOSThread() // nsenter enters the pod's namespaces itself
			defer runtime.UnlockOSThread()
			return run(cmd)
		}
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return fmt.Errorf("run in netns %q: %w", name, err)
	}
	cmd := &exec.Cmd{Path: path, Args: argv, Env: env}
	// Do's thread stays locked (and in the namespace) until the command has exited.
	return Do(name, func() error { return run(cmd) })
}
