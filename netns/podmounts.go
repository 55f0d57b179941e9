package netns

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// podMounts is the mount namespace a pod's init is cloned from (see podMountNamespace),
// made once per process.
var podMounts struct {
	sync.Mutex
	fd int // open while made
}

// podMountNamespace returns a descriptor (owned by the package, never closed) of the
// mount namespace the pod inits are cloned from: a copy of the caller's made when first
// asked for, in which every mount is private and the named network namespaces (RunDir and
// what is under it) are detached.
//
// Cloning the lab's own mount namespace instead cost each pod a copy of every other pod's
// namespace bind mount (copy_tree on clone, O(pods)), and, as the pod's / is a slave of
// the lab's, every later pod's bind mount was propagated into every earlier pod's mount
// namespace (O(pods) per bind mount): O(pods²) mounts for a lab, the larger part of the
// lab's CPU per pod at 400 pods. This namespace's mount table does not grow: it has no
// RunDir and receives nothing (private), so a pod's init copies the same few mounts
// whatever the lab's size and no bind mount reaches it. A pod sees the files of the
// host's filesystems as they are now (a copy of a mount is the same filesystem); only
// mounts the host makes later do not reach pods started later.
func podMountNamespace() (int, error) {
	podMounts.Lock()
	defer podMounts.Unlock()
	if podMounts.fd > 0 {
		return podMounts.fd, nil
	}
	type made struct {
		fd  int
		err error
	}
	done := make(chan made, 1)
	// With its own fs and mount namespace the thread is no thread for other goroutines.
	onDisposableThread(func() {
		fd, err := detachedMountNamespace()
		done <- made{fd, err}
	})
	m := <-done
	if m.err != nil {
		return -1, fmt.Errorf("make the pods' mount namespace: %w", m.err)
	}
	podMounts.fd = m.fd
	return m.fd, nil
}

// detachedMountNamespace moves the calling (locked, disposable) thread into a new mount
// namespace, makes its mounts private, detaches RunDir and every mount under it, and
// opens the namespace.
func detachedMountNamespace() (int, error) {
	if err := unix.Unshare(unix.CLONE_FS | unix.CLONE_NEWNS); err != nil {
		return -1, fmt.Errorf("unshare: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return -1, fmt.Errorf("make / private: %w", err)
	}
	self := fmt.Sprintf("/proc/%d/task/%d/", unix.Getpid(), unix.Gettid())
	points, err := mountPointsUnder(self+"mountinfo", RunDir)
	if err != nil {
		return -1, err
	}
	for _, p := range points { // RunDir first: detaching it detaches what is under it
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			return -1, fmt.Errorf("detach %s: %w", p, err)
		}
	}
	fd, err := unix.Open(self+"ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open the mount namespace: %w", err)
	}
	return fd, nil
}

// mountPointsUnder lists the mount points of the mount table at mountinfo that are dir or
// under it, shortest first (a path mounted on more than once is listed once per mount).
func mountPointsUnder(mountinfo, dir string) ([]string, error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		p := unescapeMountPath(fields[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	sort.SliceStable(points, func(i, j int) bool { return len(points[i]) < len(points[j]) })
	return points, nil
}
