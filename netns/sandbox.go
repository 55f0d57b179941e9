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
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Sandbox says how an app is isolated in its pod, as a container runtime isolates a
// container: the app is the only tree of processes in a PID namespace of its own (whose
// init is the sandbox shim), with a mount namespace of its own in which /proc is that PID
// namespace's, /etc/resolv.conf and /etc/hosts are the pod's and Hide directories are
// empty, a UTS namespace with the pod's hostname, and it runs as UID:GID with no
// supplementary groups, no capabilities (bounding and ambient sets empty), no_new_privs
// and a seccomp filter that refuses the calls that reach into another process (ptrace,
// process_vm_readv/writev, pidfd_getfd, process_madvise, kcmp).
type Sandbox struct {
	UID        uint32   `json:"uid"` // never 0
	GID        uint32   `json:"gid"` // never 0
	Hostname   string   `json:"hostname,omitempty"`
	ResolvConf string   `json:"resolvConf,omitempty"` // bound read-only on /etc/resolv.conf
	Hosts      string   `json:"hosts,omitempty"`      // bound read-only on /etc/hosts
	Hide       []string `json:"hide,omitempty"`       // directories covered by an empty read-only tmpfs
}

// Validate reports what is missing or malformed in s.
func (s Sandbox) Validate() error {
	var errs []error
	if s.UID == 0 {
		errs = append(errs, errors.New("uid: must not be 0 (root)"))
	}
	if s.GID == 0 {
		errs = append(errs, errors.New("gid: must not be 0 (root)"))
	}
	if len(s.Hostname) > 64 {
		errs = append(errs, fmt.Errorf("hostname %q: longer than 64 characters", s.Hostname))
	}
	for field, p := range map[string]string{"resolvConf": s.ResolvConf, "hosts": s.Hosts} {
		if p != "" && !filepath.IsAbs(p) {
			errs = append(errs, fmt.Errorf("%s %q: must be an absolute path", field, p))
		}
	}
	for _, p := range s.Hide {
		if !filepath.IsAbs(p) || filepath.Clean(p) == "/" {
			errs = append(errs, fmt.Errorf("hide %q: must be an absolute path other than /", p))
		}
	}
	if _, err := seccompArch(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Names the sandbox shim answers to: the meshlab binary (any binary importing this
// package) re-executed with argv[0] podInitArg0 becomes the pod's init; with podExecEnv
// set, it is a command `meshlab exec` runs in a pod (see ExecInPod).
const (
	podInitArg0 = "meshlab-pod-init"
	podExecEnv  = "MESHLAB_POD_EXEC"
)

func init() {
	switch {
	case len(os.Args) > 2 && os.Args[0] == podInitArg0:
		// argv: meshlab-pod-init <sandbox json> <app argv...>
		os.Exit(podInit(os.Args[1], os.Args[2:]))
	case os.Getenv(podExecEnv) != "":
		os.Exit(podExec(os.Getenv(podExecEnv), os.Args[1:]))
	}
}

// StartSandboxed starts cmd (not yet started, its Path and Args the app's) inside the
// named network namespace and in sb: it starts this binary again as the pod's init, in
// new PID, mount and UTS namespaces, which sets the sandbox up and starts the app. The
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
	appPath := cmd.Path
	if cmd.Err != nil {
		return fmt.Errorf("start %s in netns %q: %w", cmd.Path, name, cmd.Err)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("start %s in netns %q: find own binary for the pod init: %w", appPath, name, err)
	}
	args := append([]string{podInitArg0, string(conf), appPath}, cmd.Args[1:]...)
	cmd.Path, cmd.Args = self, args
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Cloneflags |= unix.CLONE_NEWPID | unix.CLONE_NEWNS | unix.CLONE_NEWUTS
	return Start(name, cmd)
}

// podInit is the pod's init (PID 1 of the pod's PID namespace, root in its fresh mount
// and UTS namespaces). It prepares the sandbox, starts the app from a thread restricted
// as the app must be, then reaps every process of the namespace and passes signals on
// until the app exits, and exits with its status.
func podInit(conf string, argv []string) int {
	runtime.LockOSThread() // prctl and seccomp below are per thread; the app is forked from it
	var sb Sandbox
	if err := json.Unmarshal([]byte(conf), &sb); err != nil {
		return initFail(fmt.Errorf("decode sandbox: %w", err))
	}
	if err := sb.Validate(); err != nil {
		return initFail(err)
	}
	if err := sb.mountAll(); err != nil {
		return initFail(err)
	}
	if sb.Hostname != "" {
		if err := unix.Sethostname([]byte(sb.Hostname)); err != nil {
			return initFail(fmt.Errorf("set hostname %q: %w", sb.Hostname, err))
		}
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGCHLD)
	if err := restrictThread(); err != nil {
		return initFail(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: sb.UID, Gid: sb.GID, Groups: []uint32{}},
		Setsid:     true,
	}
	if err := cmd.Start(); err != nil {
		return initFail(fmt.Errorf("start app: %w", err))
	}
	app := cmd.Process.Pid
	for {
		// Reap everything: orphans of the app are re-parented to this init.
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

// mountAll makes the mount namespace the app sees: nothing it mounts propagates back, /proc
// is its PID namespace's, the pod's resolv.conf and hosts are bound read-only, and every
// Hide directory is an empty read-only tmpfs.
func (s Sandbox) mountAll() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make / a slave mount: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc of the pod's PID namespace: %w", err)
	}
	for target, src := range map[string]string{"/etc/resolv.conf": s.ResolvConf, "/etc/hosts": s.Hosts} {
		if src == "" {
			continue
		}
		// /etc/resolv.conf is often a symlink (systemd-resolved): bind on what it names.
		dst, err := filepath.EvalSymlinks(target)
		if err != nil {
			return fmt.Errorf("bind %s on %s: %w", src, target, err)
		}
		if err := bindReadOnly(src, dst); err != nil {
			return fmt.Errorf("bind %s on %s: %w", src, target, err)
		}
	}
	for _, dir := range s.Hide {
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,mode=755"); err != nil {
			return fmt.Errorf("hide %s: %w", dir, err)
		}
	}
	return nil
}

func bindReadOnly(src, dst string) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	return unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, "")
}

// restrictThread empties the calling thread's capability bounding and ambient sets, sets
// no_new_privs and installs the seccomp filter. What the thread forks or execs after a
// switch to a non-zero uid has no capability left and can never gain one.
func restrictThread() error {
	last, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return fmt.Errorf("read the last capability: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(last)))
	if err != nil {
		return fmt.Errorf("read the last capability: %w", err)
	}
	for c := 0; c <= n; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	return installSeccomp()
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
	if err := restrictThread(); err != nil {
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
		if len(args) < 3 || args[0] != podInitArg0 {
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
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		return fmt.Errorf("exec in pod: util-linux's nsenter is needed to enter the app's mount namespace: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("exec in pod: find own binary: %w", err)
	}
	conf, err := json.Marshal(sb)
	if err != nil {
		return fmt.Errorf("exec in pod: encode sandbox: %w", err)
	}
	args := append([]string{nsenter, "--target", strconv.Itoa(pid), "--net", "--mount", "--pid", "--uts", "--", self}, argv...)
	env = append(env[:len(env):len(env)], podExecEnv+"="+string(conf))
	err = syscall.Exec(nsenter, args, env)
	return fmt.Errorf("exec in pod: %s: %w", nsenter, err)
}
