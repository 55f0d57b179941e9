package netns

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// RunDir is where named namespaces are bind-mounted, as iproute2 does.
const RunDir = "/run/netns"

// ErrExists is returned by Create when the named namespace already exists.
var ErrExists = errors.New("netns already exists")

// Path returns the bind mount path of the named namespace.
func Path(name string) string { return filepath.Join(RunDir, name) }

// checkName rejects names that are not a single plain file name under RunDir.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") || len(name) > 255 {
		return fmt.Errorf("invalid netns name %q", name)
	}
	return nil
}

// openNamespace opens the named namespace's file for setns; the caller closes the fd.
func openNamespace(name string) (int, error) {
	if err := checkName(name); err != nil {
		return -1, err
	}
	fd, err := unix.Open(Path(name), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open netns %q: %w", name, err)
	}
	return fd, nil
}

// Create makes a new named network namespace, like `ip netns add`: a bind mount of a fresh
// namespace at /run/netns/<name>. It returns an error wrapping ErrExists if the name is taken.
func Create(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := prepareRunDir(); err != nil {
		return fmt.Errorf("create netns %q: %w", name, err)
	}
	path := Path(name)
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create netns %q: %w", name, ErrExists)
	}
	if err != nil {
		return fmt.Errorf("create netns %q: %w", name, err)
	}
	_ = f.Close()
	if err := bindNewNamespace(path); err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("create netns %q: %w", name, err)
	}
	return nil
}

// runDirMu serializes prepareRunDir: two Creates must not both self-bind RunDir.
// runDirReady: it succeeded once in this process, and RunDir stays a shared mount point.
var (
	runDirMu    sync.Mutex
	runDirReady bool
)

// prepareRunDir makes RunDir a mount point of its own with shared propagation before the
// first namespace is bound under it, as iproute2 does (`mount --make-rshared /run/netns`,
// and when that fails with EINVAL because it is no mount point, `mount --rbind /run/netns
// /run/netns` first). Were it not done, the first `ip netns add` beside a lab would do it
// on top of the lab's namespace mounts: their copies in the new mount would hide the
// originals, and `ip netns delete`, `down` and `clean` would then fail with EBUSY.
//
// A RunDir that is no mount point but already holds namespaces (made by a meshlab or a
// tool that did not do this) is left alone: a recursive self-bind now would stack copies
// on those namespaces and break whoever owns them. IsRunDirMounted tells which case holds.
//
// It does so once per process: read again for every namespace, the mount table (one line
// per namespace) and the recursive remount (one change per mount under RunDir) made
// each Create cost more than the one before, quadratic over a 1000-pod lab.
func prepareRunDir() error {
	runDirMu.Lock()
	defer runDirMu.Unlock()
	if runDirReady {
		return nil
	}
	if err := os.MkdirAll(RunDir, 0o755); err != nil {
		return err
	}
	mounted, err := IsRunDirMounted()
	if err != nil {
		return err
	}
	if !mounted {
		entries, err := os.ReadDir(RunDir)
		if err != nil {
			return fmt.Errorf("list %s: %w", RunDir, err)
		}
		if len(entries) > 0 {
			return nil
		}
		if err := unix.Mount(RunDir, RunDir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind mount %s on itself: %w", RunDir, err)
		}
	}
	if err := unix.Mount("", RunDir, "none", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("make %s shared: %w", RunDir, err)
	}
	runDirReady = true
	return nil
}

// IsRunDirMounted reports whether RunDir is a mount point in the caller's mount namespace.
func IsRunDirMounted() (bool, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false, fmt.Errorf("read mount table: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		// 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw: field 5 is the mount point.
		f := strings.Fields(line)
		if len(f) > 4 && unescapeMountPath(f[4]) == RunDir {
			return true, nil
		}
	}
	return false, nil
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space...).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// bindNewNamespace unshares a new network namespace on a locked thread, bind-mounts it at
// path and puts the thread back. Like Do, it abandons the thread if it cannot restore it.
func bindNewNamespace(path string) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		origin, err := unix.Open(threadNSPath(), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("open current netns: %w", err)
			return
		}
		defer unix.Close(origin)
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("unshare netns: %w", err)
			return
		}
		mountErr := unix.Mount(threadNSPath(), path, "none", unix.MS_BIND, "")
		if mountErr != nil {
			mountErr = fmt.Errorf("bind mount %s: %w", path, mountErr)
		}
		if err := unix.Setns(origin, unix.CLONE_NEWNET); err != nil {
			done <- errors.Join(mountErr, fmt.Errorf("restore netns: %w", err))
			return // thread stays locked and is discarded
		}
		runtime.UnlockOSThread()
		done <- mountErr
	}()
	return <-done
}

// Delete removes the named namespace, like `ip netns delete`: it unmounts and removes
// /run/netns/<name>. The namespace itself (and every link in it) vanishes once no process
// or open file holds it. Delete returns nil if the namespace does not exist.
func Delete(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	path := Path(name)
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("delete netns %q: unmount: %w", name, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete netns %q: %w", name, err)
	}
	return nil
}

// Exists reports whether /run/netns/<name> exists and is a mounted network namespace.
func Exists(name string) bool {
	if checkName(name) != nil {
		return false
	}
	var st unix.Statfs_t
	if err := unix.Statfs(Path(name), &st); err != nil {
		return false
	}
	return st.Type == unix.NSFS_MAGIC
}

// List returns the names under /run/netns that start with prefix, sorted. A missing
// /run/netns is an empty list.
func List(prefix string) ([]string, error) {
	entries, err := os.ReadDir(RunDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list netns: %w", err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) && !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}
