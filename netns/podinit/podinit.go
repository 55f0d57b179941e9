// Package podinit is the first half of a sandboxed app's start (see netns.StartSandboxed):
// the meshlab binary, started again as a pod's init, sets the sandbox up and starts the
// app from its package initializer, before the rest of the binary's packages initialize.
// It imports nothing that the protobuf runtime does not, so that Go initializes it before
// the binary's generated protobuf packages (some 20ms): an app sandboxed or not starts as
// soon, and races its sidecar as it would in a Kubernetes pod. The init then replaces
// itself with a reaper of a few hundred bytes (reaper.go), so a pod's init costs a few
// pages, not a Go process; where that cannot be, netns, initialized later, runs the same
// reaper loop in Go.
package podinit

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Sandbox says how an app is isolated in its pod, as a container runtime isolates a
// container: the app is the only tree of processes in a PID namespace of its own (whose
// init is the meshlab binary), with a mount namespace of its own in which /proc is that PID
// namespace's, /etc/resolv.conf and /etc/hosts are the pod's and Hide directories are
// empty, a UTS namespace with the pod's hostname, and it runs as UID:GID with no
// supplementary groups, no capabilities (bounding and ambient sets empty), no_new_privs
// and a seccomp filter that refuses the calls that reach into another process (ptrace,
// process_vm_readv/writev, pidfd_getfd, process_madvise, kcmp).
type Sandbox struct {
	UID        uint32 `json:"uid"` // never 0
	GID        uint32 `json:"gid"` // never 0
	Hostname   string `json:"hostname,omitempty"`
	ResolvConf string `json:"resolvConf,omitempty"` // bound read-only on /etc/resolv.conf
	Hosts      string `json:"hosts,omitempty"`      // bound read-only on /etc/hosts
	// TrustBundle is bound read-only on every system CA bundle file the host has (see
	// SystemBundles), as a container image brings its own trust: the lab's outside
	// world is trusted through it.
	TrustBundle string   `json:"trustBundle,omitempty"`
	Hide        []string `json:"hide,omitempty"` // directories covered by an empty read-only tmpfs
	// Binds are directories of the pod shared with the app, as a volume mounted into two
	// containers (a proxyless pod's bootstrap, XDS socket and certificate files): each is
	// bound read-only at its Dst, which may lie in a Hide directory (its path is then
	// made in the tmpfs, and nothing else of the hidden directory shows); a Writable one
	// is bound read-write, as an emptyDir volume.
	Binds []Bind `json:"binds,omitempty"`
	// Tmp, set, is the pod's own /tmp: an overlay over the host's /tmp whose upper layer
	// is this directory (and whose work directory is Tmp+".work", made empty beside it on
	// the same file system). The app and what `meshlab exec` and `meshlab cp` run in the
	// pod see the host's /tmp beneath, as they see the rest of the host's files (the
	// binaries a test builds there stay runnable), while what they write in /tmp is the
	// pod's alone, as a container's writable layer is: no other pod and not the host see
	// it, and it goes with the pod's run directory.
	Tmp string `json:"tmp,omitempty"`
	// Env is added to the app's environment and to what `meshlab exec` runs in the pod
	// ("KEY=VALUE", replacing an inherited KEY), as a container's env.
	Env []string `json:"env,omitempty"`
	// Init is the binary started as the pod's init; it must link this package and
	// package netns (meshlab and meshlab-app do). Optional: the starting binary itself.
	// A small binary starts sooner and cheaper than the one binary of a hundred packages.
	// The starter's only: the init is not told.
	Init string `json:"-"`
	// InProcess makes the init become the app rather than fork it: the init binary must
	// be the app's (Init the app's path), and it continues from this package's
	// initializer as the app, restricted on every thread, as PID 1 of the pod's PID
	// namespace, the way a container's process is PID 1 of its own. No fork, no second
	// Go runtime, no reaper: a pod of the small app (cmd/meshlab-app) starts one process.
	// Its argv keeps the init's form (Arg0, the Sandbox, the app's path and arguments),
	// by which `meshlab exec` finds the pod's sandbox; os.Args is the app's.
	InProcess bool `json:"inProcess,omitempty"`
}

// Bind is one directory bound into the app's view: Src (as the lab sees it) at Dst.
type Bind struct {
	Src      string `json:"src"`
	Dst      string `json:"dst"`
	Writable bool   `json:"writable,omitempty"` // the app may write in it (Prometheus' TSDB)
}

// Environ is base with s.Env added, each replacing the same key of base.
func (s Sandbox) Environ(base []string) []string {
	out := make([]string, 0, len(base)+len(s.Env))
	for _, e := range base {
		k, _, _ := strings.Cut(e, "=")
		replaced := false
		for _, n := range s.Env {
			if strings.HasPrefix(n, k+"=") {
				replaced = true
				break
			}
		}
		if !replaced {
			out = append(out, e)
		}
	}
	return append(out, s.Env...)
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
	for _, f := range []struct{ field, path string }{{"resolvConf", s.ResolvConf}, {"hosts", s.Hosts}, {"trustBundle", s.TrustBundle}} {
		if f.path != "" && !strings.HasPrefix(f.path, "/") {
			errs = append(errs, fmt.Errorf("%s %q: must be an absolute path", f.field, f.path))
		}
	}
	for _, p := range s.Hide {
		if !strings.HasPrefix(p, "/") || strings.Trim(p, "/") == "" {
			errs = append(errs, fmt.Errorf("hide %q: must be an absolute path other than /", p))
		}
	}
	if s.Tmp != "" && (!strings.HasPrefix(s.Tmp, "/") || strings.ContainsAny(s.Tmp, ",:\\") || strings.Trim(s.Tmp, "/") == "") {
		// The overlay's options are "lowerdir=/tmp,upperdir=...": a comma or colon in
		// the path would be read as another option or layer.
		errs = append(errs, fmt.Errorf("tmp %q: must be an absolute path other than / with no comma, colon or backslash", s.Tmp))
	}
	for _, b := range s.Binds {
		if !strings.HasPrefix(b.Src, "/") || !strings.HasPrefix(b.Dst, "/") || strings.Trim(b.Dst, "/") == "" {
			errs = append(errs, fmt.Errorf("bind %q on %q: both must be absolute paths, the target other than /", b.Src, b.Dst))
		}
	}
	for _, e := range s.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			errs = append(errs, fmt.Errorf("env %q: want KEY=VALUE", e))
		}
	}
	if _, err := seccompArch(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Arg0 is the argv[0] under which the meshlab binary is the pod's init:
// argv = Arg0, the Sandbox as JSON, the app's absolute path, the app's arguments.
const Arg0 = "meshlab-pod-init"

// AppPID is the app's pid when this process is a pod's init that started it and could not
// exec the reaper; netns's initializer then runs the reaper loop (netns.StartSandboxed).
var AppPID int

func init() {
	if len(os.Args) < 3 || os.Args[0] != Arg0 {
		return
	}
	sb, err := prepare(os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "meshlab pod init: %v\n", err)
		os.Exit(127)
	}
	if sb.InProcess {
		err := becomeApp(sb, os.Args[2])
		if err == nil {
			os.Args = os.Args[2:]
			return
		}
		if !errors.Is(err, errNoAllThreads) {
			fmt.Fprintf(os.Stderr, "meshlab pod init: %v\n", err)
			os.Exit(127)
		}
		// A cgo build cannot change every thread: the init forks the app as for any.
	}
	pid, err := start(sb, os.Args[2:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "meshlab pod init: %v\n", err)
		os.Exit(127)
	}
	err = execReaper(pid, os.Args) // returns only on failure
	if !errors.Is(err, errNoReaper) {
		fmt.Fprintf(os.Stderr, "meshlab pod init: %v; the Go init stays\n", err)
	}
	AppPID = pid
}

// prepare sets the sandbox of conf up: the init is root in fresh PID, mount and UTS
// namespaces, and makes the mounts and hostname the app sees.
func prepare(conf string) (Sandbox, error) {
	var sb Sandbox
	if err := json.Unmarshal([]byte(conf), &sb); err != nil {
		return sb, fmt.Errorf("decode sandbox: %w", err)
	}
	if err := sb.Validate(); err != nil {
		return sb, err
	}
	if err := sb.mountAll(); err != nil {
		return sb, err
	}
	if sb.Hostname != "" {
		if err := unix.Sethostname([]byte(sb.Hostname)); err != nil {
			return sb, fmt.Errorf("set hostname %q: %w", sb.Hostname, err)
		}
	}
	return sb, nil
}

// start starts the app of the prepared sandbox from a thread of its own, restricted as
// the app must be; that thread ends with it, so the init's other threads keep the
// capabilities its reaper needs to signal the app's uid.
func start(sb Sandbox, argv []string) (int, error) {
	type started struct {
		pid int
		err error
	}
	done := make(chan started, 1)
	go func() {
		// prctl and seccomp are per thread and the app is forked from this one; never
		// unlocked, so the thread exits with this goroutine, its restrictions with it.
		runtime.LockOSThread()
		if err := RestrictThread(); err != nil {
			done <- started{err: err}
			return
		}
		pid, err := syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{
			Dir:   "/",
			Env:   sb.Environ(os.Environ()),
			Files: []uintptr{0, 1, 2},
			Sys: &syscall.SysProcAttr{
				Credential: &syscall.Credential{Uid: sb.UID, Gid: sb.GID, Groups: []uint32{}},
				Setsid:     true,
			},
		})
		if err != nil {
			err = fmt.Errorf("start app %s: %w", argv[0], err)
		}
		done <- started{pid, err}
	}()
	s := <-done
	return s.pid, s.err
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
	if err := s.mountTmp(); err != nil {
		return err
	}
	for _, b := range []struct{ target, src string }{{"/etc/resolv.conf", s.ResolvConf}, {"/etc/hosts", s.Hosts}} {
		if b.src == "" {
			continue
		}
		// /etc/resolv.conf is often a symlink (systemd-resolved): bind on what it names.
		dst, err := resolve(b.target)
		if err != nil {
			return fmt.Errorf("bind %s on %s: %w", b.src, b.target, err)
		}
		if err := bindReadOnly(b.src, dst); err != nil {
			return fmt.Errorf("bind %s on %s: %w", b.src, dst, err)
		}
	}
	if err := s.bindTrustBundle(); err != nil {
		return err
	}
	// A bind's source may lie in a directory about to be hidden: hold it open, and bind
	// from the descriptor once its target exists.
	srcs := make([]int, len(s.Binds))
	for i, b := range s.Binds {
		fd, err := unix.Open(b.Src, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("bind %s on %s: open the source: %w", b.Src, b.Dst, err)
		}
		defer unix.Close(fd)
		srcs[i] = fd
	}
	const hideFlags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	var hidden []string
	for _, dir := range s.Hide {
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			continue
		}
		// Writable until the binds' targets are made in it, then read-only.
		if err := unix.Mount("tmpfs", dir, "tmpfs", hideFlags, "size=4k,mode=755"); err != nil {
			return fmt.Errorf("hide %s: %w", dir, err)
		}
		hidden = append(hidden, dir)
	}
	for i, b := range s.Binds {
		for _, dir := range hidden {
			if b.Dst == dir || strings.HasPrefix(b.Dst, strings.TrimSuffix(dir, "/")+"/") {
				if err := os.MkdirAll(b.Dst, 0o755); err != nil {
					return fmt.Errorf("bind %s on %s: make the target in hidden %s: %w", b.Src, b.Dst, dir, err)
				}
			}
		}
		bind := bindReadOnly
		if b.Writable {
			bind = bindWritable
		}
		if err := bind("/proc/self/fd/"+strconv.Itoa(srcs[i]), b.Dst); err != nil {
			return fmt.Errorf("bind %s on %s: %w", b.Src, b.Dst, err)
		}
	}
	for _, dir := range hidden {
		if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY|hideFlags, "size=4k,mode=755"); err != nil {
			return fmt.Errorf("hide %s: make it read-only: %w", dir, err)
		}
	}
	return nil
}

// tmpDir is the directory the pod's own /tmp covers (see Sandbox.Tmp).
const tmpDir = "/tmp"

// mountTmp mounts the pod's /tmp (Sandbox.Tmp): an overlay of Tmp over the host's /tmp,
// nosuid and nodev as a container runtime mounts its /tmp. The work directory must be
// empty and on Tmp's file system: it is made afresh.
func (s Sandbox) mountTmp() error {
	if s.Tmp == "" {
		return nil
	}
	work := s.Tmp + ".work"
	if err := os.RemoveAll(work); err != nil {
		return fmt.Errorf("mount the pod's /tmp: clear the overlay's work directory: %w", err)
	}
	if err := os.Mkdir(work, 0o700); err != nil {
		return fmt.Errorf("mount the pod's /tmp: make the overlay's work directory: %w", err)
	}
	opts := "lowerdir=" + tmpDir + ",upperdir=" + s.Tmp + ",workdir=" + work
	if err := unix.Mount("overlay", tmpDir, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount the pod's /tmp (overlay %s): %w", opts, err)
	}
	return nil
}

// SystemBundles are the files distributions keep the system trust bundle in (those Go's
// crypto/x509 reads; curl and OpenSSL read the first or second).
var SystemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",                // Debian, Ubuntu, Gentoo, Arch
	"/etc/pki/tls/certs/ca-bundle.crt",                  // Fedora, RHEL
	"/etc/ssl/ca-bundle.pem",                            // openSUSE
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", // CentOS, RHEL 7
	"/etc/ssl/cert.pem",                                 // Alpine
}

// bindTrustBundle binds TrustBundle on each system bundle file that exists (following
// symlinks, each target once). A host with none has no trust store to replace.
func (s Sandbox) bindTrustBundle() error {
	if s.TrustBundle == "" {
		return nil
	}
	done := map[string]bool{}
	for _, p := range SystemBundles {
		dst, err := resolve(p)
		if err != nil || done[dst] {
			continue
		}
		done[dst] = true
		if err := bindReadOnly(s.TrustBundle, dst); err != nil {
			return fmt.Errorf("bind %s on %s: %w", s.TrustBundle, dst, err)
		}
	}
	return nil
}

// resolve follows the symlinks of an absolute file path in /etc (path/filepath is not
// imported, see the package comment), at most 8 of them.
func resolve(p string) (string, error) {
	for range 8 {
		target, err := os.Readlink(p)
		if errors.Is(err, syscall.EINVAL) {
			_, err := os.Stat(p)
			return p, err
		}
		if err != nil {
			return "", err
		}
		if !strings.HasPrefix(target, "/") {
			target = p[:strings.LastIndexByte(p, '/')+1] + target
		}
		p = target
	}
	return "", fmt.Errorf("resolve %s: too many symbolic links", p)
}

func bindReadOnly(src, dst string) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	return unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, "")
}

func bindWritable(src, dst string) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	return unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV, "")
}

// RestrictThread empties the calling thread's capability bounding and ambient sets, sets
// no_new_privs and installs the seccomp filter. What the thread forks or execs after a
// switch to a non-zero uid has no capability left and can never gain one.
func RestrictThread() error {
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
	return installSeccomp(false)
}

// becomeApp makes this process, the init of a prepared sandbox, the app at path (which
// must be this binary): the app's environment and working directory, then on every
// thread of the process what RestrictThread does on one, then the app's uid and gid.
// Threads the runtime makes later are cloned from restricted ones.
func becomeApp(sb Sandbox, path string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("run the app in the init: find own binary: %w", err)
	}
	if self != path {
		return fmt.Errorf("run the app in the init: the app %s is not the init's binary %s", path, self)
	}
	if err := restrictAllThreads(); err != nil {
		return err
	}
	for _, e := range sb.Env {
		k, v, _ := strings.Cut(e, "=")
		if err := os.Setenv(k, v); err != nil {
			return fmt.Errorf("set the app's env %s: %w", k, err)
		}
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	// Setgroups, Setgid and Setuid change every thread (Go does it for all).
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("drop groups: %w", err)
	}
	if err := syscall.Setgid(int(sb.GID)); err != nil {
		return fmt.Errorf("set gid %d: %w", sb.GID, err)
	}
	if err := syscall.Setuid(int(sb.UID)); err != nil {
		return fmt.Errorf("set uid %d: %w", sb.UID, err)
	}
	// The uid change made the process undumpable, which an app exec'd as its uid is not
	// (its /proc files are its own): as it would be.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set dumpable: %w", err)
	}
	return nil
}

// errNoAllThreads says this build cannot make a system call on every thread (cgo's
// threads are not the runtime's): the init starts the app as a child instead.
var errNoAllThreads = errors.New("no system call on every thread in this build")

// restrictAllThreads is RestrictThread on every thread of the process.
func restrictAllThreads() error {
	last, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return fmt.Errorf("read the last capability: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(last)))
	if err != nil {
		return fmt.Errorf("read the last capability: %w", err)
	}
	prctl := func(what string, op, arg uintptr) error {
		if _, _, e := syscall.AllThreadsSyscall(unix.SYS_PRCTL, op, arg, 0); e != 0 {
			return fmt.Errorf("%s on every thread: %w", what, e)
		}
		return nil
	}
	first := true
	for c := 0; c <= n; c++ {
		// Every thread has this thread's bounding set (none changed it since the exec):
		// what the lab left out of it when it started the init need not be dropped.
		if in, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0); err == nil && in == 0 {
			continue
		}
		if err := prctl(fmt.Sprintf("drop capability %d from the bounding set", c), unix.PR_CAPBSET_DROP, uintptr(c)); err != nil {
			if first && errors.Is(err, syscall.ENOTSUP) {
				return errNoAllThreads // nothing changed yet
			}
			return err
		}
		first = false
	}
	if _, _, e := syscall.AllThreadsSyscall6(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0, 0); e != 0 {
		if first && errors.Is(e, syscall.ENOTSUP) {
			return errNoAllThreads
		}
		return fmt.Errorf("clear ambient capabilities on every thread: %w", e)
	}
	if err := prctl("set no_new_privs", unix.PR_SET_NO_NEW_PRIVS, 1); err != nil {
		return err
	}
	return installSeccomp(true)
}
