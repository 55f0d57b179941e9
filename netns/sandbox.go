package netns

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/meshlab/meshlab/netns/podinit"
)

// Sandbox says how an app is isolated in its pod (see podinit.Sandbox).
type Sandbox = podinit.Sandbox

// Bind is a directory shared with a sandboxed app (see podinit.Bind).
type Bind = podinit.Bind

// podExecEnv, set, makes the meshlab binary (any binary importing this package) a
// command `meshlab exec` runs in a pod (see ExecInPod).
const podExecEnv = "MESHLAB_POD_EXEC"

func init() {
	switch {
	case podinit.AppPID > 0:
		// podinit started the app as this process's package initializer ran, and could
		// not exec its reaper (see podinit's reaper.go).
		os.Exit(reap(podinit.AppPID))
	case os.Getenv(podExecEnv) != "":
		os.Exit(podExec(os.Getenv(podExecEnv), os.Args[1:]))
	case os.Getenv(proxyExecEnv) != "":
		os.Exit(proxyExec(os.Getenv(proxyExecEnv), os.Args[1:])) // proxyexec.go
	}
}

// StartSandboxed starts cmd (not yet started, its Path and Args the app's) inside the
// named network namespace and in sb: it starts this binary again (or sb.Init) as the
// pod's init, in new PID, mount and UTS namespaces, which sets the sandbox up and starts the app. The
// caller supervises the returned process as it would the app: SIGTERM and the other
// terminating signals are passed on to the app, the init exits with the app's status,
// and killing the init kills the app (the PID namespace goes with it).
//
// cmd.SysProcAttr must not set Credential: sb says whom the app runs as.
func StartSandboxed(name string, cmd *exec.Cmd, sb Sandbox) error {
	if err := sb.Validate(); err != nil {
		return fmt.Errorf("start %s in netns %q: sandbox: %w", cmd.Path, name, err)
	}
	if cmd.SysProcAttr != nil && cmd.SysProcAttr.Credential != nil {
		return fmt.Errorf("start %s in netns %q: sandbox: the credential is the sandbox's uid, not SysProcAttr.Credential", cmd.Path, name)
	}
	conf, err := json.Marshal(sb)
	if err != nil {
		return fmt.Errorf("start %s in netns %q: encode sandbox: %w", cmd.Path, name, err)
	}
	if cmd.Err != nil {
		return fmt.Errorf("start %s in netns %q: %w", cmd.Path, name, cmd.Err)
	}
	appPath, err := filepath.Abs(cmd.Path) // the init forks it from / with no PATH lookup
	if err != nil {
		return fmt.Errorf("start %s in netns %q: %w", cmd.Path, name, err)
	}
	self := sb.Init
	if sb.InProcess && self != appPath {
		return fmt.Errorf("start %s in netns %q: sandbox: an app run in its init must be the init's binary (Init %q)", appPath, name, sb.Init)
	}
	if self == "" {
		if self, err = os.Executable(); err != nil {
			return fmt.Errorf("start %s in netns %q: find own binary for the pod init: %w", appPath, name, err)
		}
	}
	args := append([]string{podinit.Arg0, string(conf), appPath}, cmd.Args[1:]...)
	cmd.Path, cmd.Args = self, args
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Cloneflags |= unix.CLONE_NEWPID | unix.CLONE_NEWNS | unix.CLONE_NEWUTS
	if sb.InProcess {
		// The session of its own the init gives a forked app (a new process group too,
		// whose id is the pid, as Setpgid's).
		cmd.SysProcAttr.Setpgid, cmd.SysProcAttr.Setsid = false, true
		if cmd.SysProcAttr.Pdeathsig == 0 { // a parent-death signal would come with the thread's end
			return startInitOnly(name, cmd)
		}
	}
	return Start(name, cmd)
}

// initCaps are the capabilities a pod's init that becomes its app uses before it does:
// its mounts and hostname (SYS_ADMIN, with the file access of root), emptying the
// bounding set (SETPCAP), the app's uid, gid and groups, and, when it must fork the app
// after all (a cgo build), signalling it.
var initCaps = []uintptr{
	unix.CAP_SYS_ADMIN, unix.CAP_SETPCAP, unix.CAP_SETUID, unix.CAP_SETGID,
	unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_DAC_READ_SEARCH, unix.CAP_FOWNER, unix.CAP_KILL,
}

// startInitOnly is Start from a thread whose capability bounding set holds initCaps only,
// so the init is exec'd with those and no others (the bounding set is per thread and
// inherited by what it forks). The init must still empty the bounding set of every thread
// it has, one system call on all threads per capability (podinit's restrictAllThreads,
// ~4 ms of a pod's start in this VM for the 41 of them); with these nine left it has nine
// to drop. The init is cloned from the pods' mount namespace (podMountNamespace), whose
// mount table does not grow with the lab. The thread is discarded after the fork.
func startInitOnly(name string, cmd *exec.Cmd) error {
	target, err := openNamespace(name)
	if err != nil {
		return err
	}
	defer unix.Close(target)
	mounts, err := podMountNamespace()
	if err != nil {
		return fmt.Errorf("start %s in netns %q: %w", cmd.Path, name, err)
	}
	err = doIn(target, fmt.Sprintf("%q", name), func() error {
		// The init's mount namespace is a copy of the pods' one, not of the lab's.
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			return fmt.Errorf("unshare the thread's fs for the pods' mount namespace: %w", err)
		}
		if err := unix.Setns(mounts, unix.CLONE_NEWNS); err != nil {
			return fmt.Errorf("enter the pods' mount namespace: %w", err)
		}
		for c := uintptr(0); ; c++ {
			if slices.Contains(initCaps, c) {
				continue
			}
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0); errors.Is(err, unix.EINVAL) {
				break // past the last capability
			} else if err != nil {
				return fmt.Errorf("narrow the bounding set for the pod init: drop capability %d: %w", c, err)
			}
		}
		return cmd.Start()
	}, true)
	if err != nil {
		return fmt.Errorf("start %s in netns %q: %w", cmd.Path, name, err)
	}
	return nil
}

// reap is the rest of the pod's init (PID 1 of the pod's PID namespace) once podinit has
// started the app, where podinit's reaper (the same loop, a few hundred bytes of machine
// code) cannot run: it reaps every process of the namespace (orphans are re-parented to
// it) and passes terminating signals on to the app until the app exits, then exits with
// its status, which ends the namespace.
func reap(app int) int {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGCHLD)
	for {
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
			if pid == app {
				switch {
				case ws.Exited():
					return ws.ExitStatus()
				case ws.Signaled():
					return 128 + int(ws.Signal())
				}
			}
		}
		if s := <-sigs; s != unix.SIGCHLD {
			_ = unix.Kill(app, s.(syscall.Signal))
		}
	}
}

func initFail(err error) int {
	fmt.Fprintf(os.Stderr, "meshlab pod init: %v\n", err)
	return 127
}

// podExec runs argv as `meshlab exec` does in a pod: nsenter has put this process in the
// pod's namespaces; it takes the app's uid and restrictions and execs argv.
func podExec(conf string, argv []string) int {
	runtime.LockOSThread()
	var sb Sandbox
	if err := json.Unmarshal([]byte(conf), &sb); err != nil {
		return initFail(fmt.Errorf("decode sandbox: %w", err))
	}
	if len(argv) == 0 {
		return initFail(errors.New("exec: empty command"))
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return initFail(fmt.Errorf("exec: %w", err))
	}
	env := make([]string, 0, len(os.Environ()))
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, podExecEnv+"=") {
			env = append(env, e)
		}
	}
	env = sb.Environ(env) // the app's env, as kubectl exec gives a container's
	if err := podinit.RestrictThread(); err != nil {
		return initFail(err)
	}
	// Setgroups/Setgid/Setuid change every thread of the process (Go does it for all).
	if err := syscall.Setgroups(nil); err != nil {
		return initFail(fmt.Errorf("drop groups: %w", err))
	}
	if err := syscall.Setgid(int(sb.GID)); err != nil {
		return initFail(fmt.Errorf("set gid %d: %w", sb.GID, err))
	}
	if err := syscall.Setuid(int(sb.UID)); err != nil {
		return initFail(fmt.Errorf("set uid %d: %w", sb.UID, err))
	}
	err = syscall.Exec(path, argv, env)
	return initFail(fmt.Errorf("exec %s: %w", path, err))
}

// PodInit returns the pid (in the caller's PID namespace) of the init of the sandbox in the
// named network namespace, and its Sandbox; ok is false when no app there runs sandboxed.
func PodInit(name string) (pid int, sb Sandbox, ok bool, err error) {
	pids, err := PIDsIn(name)
	if err != nil {
		return 0, Sandbox{}, false, err
	}
	for _, p := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) < 3 || args[0] != podinit.Arg0 {
			continue
		}
		if err := json.Unmarshal([]byte(args[1]), &sb); err != nil {
			return 0, Sandbox{}, false, fmt.Errorf("read sandbox of pid %d: %w", p, err)
		}
		return p, sb, true, nil
	}
	return 0, Sandbox{}, false, nil
}

// ExecInPod replaces the current process with argv run as `kubectl exec` runs a command
// in a container: in the network, mount, PID and UTS namespaces of the pod's sandboxed app
// (whose init is pid), as its uid, with its restrictions (see Sandbox). It needs
// util-linux's nsenter: a multi-threaded Go process cannot join a mount namespace.
func ExecInPod(pid int, sb Sandbox, argv []string, env []string) error {
	if len(argv) == 0 {
		return errors.New("exec in pod: empty command")
	}
	cmd, err := podCommand(pid, sb, argv, env)
	if err != nil {
		return err
	}
	err = syscall.Exec(cmd.Path, cmd.Args, cmd.Env)
	return fmt.Errorf("exec in pod: %s: %w", cmd.Path, err)
}

// podCommand is the command that runs argv in the pod whose sandboxed app's init is pid:
// nsenter into its namespaces, then this binary as podExec, which takes the app's uid
// and restrictions and execs argv.
func podCommand(pid int, sb Sandbox, argv, env []string) (*exec.Cmd, error) {
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		return nil, fmt.Errorf("exec in pod: util-linux's nsenter is needed to enter the app's mount namespace: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("exec in pod: find own binary: %w", err)
	}
	conf, err := json.Marshal(sb)
	if err != nil {
		return nil, fmt.Errorf("exec in pod: encode sandbox: %w", err)
	}
	args := append([]string{nsenter, "--target", strconv.Itoa(pid), "--net", "--mount", "--pid", "--uts", "--", self}, argv...)
	return &exec.Cmd{Path: nsenter, Args: args, Env: append(env[:len(env):len(env)], podExecEnv+"="+string(conf))}, nil
}
