package netns

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// A command `meshlab exec -c istio-proxy` runs sees the istio-proxy container's volumes
// at their container paths (the secure-metrics page's curl reads the certificates its
// sidecar writes to /etc/istio-certs), while the rest of its files are the host's, as the
// proxy image's are here. Such a path is often missing on the host and meshlab makes no
// directory in the host's /etc: the command runs in a mount namespace of its own where
// the deepest existing directory above a missing target is covered by an overlay (its
// upper layer on a tmpfs that goes with the namespace), the target is made in it and the
// volume's directory bound there. Mounts below that directory are not seen through the
// overlay (it shows the files beneath them), which a command of the proxy image does
// not read.

// proxyExecEnv, set, makes this binary (any binary importing this package) the
// istio-proxy container's view for the command in its arguments (see ProxyExecEnv).
const proxyExecEnv = "MESHLAB_PROXY_EXEC"

// ProxyView is what a command of the istio-proxy container sees and runs as.
type ProxyView struct {
	UID, GID uint32 // never 0
	// Mounts are the container's volumes: each Src (a directory of the lab's) bound
	// read-write at Dst, its container path.
	Mounts []Bind `json:"mounts"`
	// Scratch is a directory of the pod's (made when missing) on which the view mounts
	// the tmpfs that holds its overlays' upper layers.
	Scratch string `json:"scratch"`
}

// ProxyExecEnv returns the environment entry that makes the meshlab binary, started as
// root in the pod's network namespace with the command as its arguments, run the command
// in view.
func ProxyExecEnv(view ProxyView) (string, error) {
	if view.UID == 0 || view.GID == 0 || !filepath.IsAbs(view.Scratch) {
		return "", fmt.Errorf("proxy view: uid and gid must not be 0 and scratch must be absolute: %+v", view)
	}
	for _, b := range view.Mounts {
		if !filepath.IsAbs(b.Src) || !filepath.IsAbs(b.Dst) || filepath.Clean(b.Dst) == "/" {
			return "", fmt.Errorf("proxy view: mount %q on %q: both must be absolute paths, the target other than /", b.Src, b.Dst)
		}
	}
	b, err := json.Marshal(view)
	if err != nil {
		return "", fmt.Errorf("proxy view: %w", err)
	}
	return proxyExecEnv + "=" + string(b), nil
}

// proxyExec mounts the view of conf in a new mount namespace, takes its uid and gid and
// execs argv; it returns only on failure, with the exit code.
func proxyExec(conf string, argv []string) int {
	runtime.LockOSThread()
	var v ProxyView
	if err := json.Unmarshal([]byte(conf), &v); err != nil {
		return initFail(fmt.Errorf("decode proxy view: %w", err))
	}
	if len(argv) == 0 {
		return initFail(errors.New("exec: empty command"))
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return initFail(fmt.Errorf("exec: %w", err))
	}
	if err := v.mount(); err != nil {
		return initFail(err)
	}
	env := make([]string, 0, len(os.Environ()))
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, proxyExecEnv+"=") {
			env = append(env, e)
		}
	}
	// Setgroups/Setgid/Setuid change every thread of the process (Go does it for all).
	if err := syscall.Setgroups(nil); err != nil {
		return initFail(fmt.Errorf("drop groups: %w", err))
	}
	if err := syscall.Setgid(int(v.GID)); err != nil {
		return initFail(fmt.Errorf("set gid %d: %w", v.GID, err))
	}
	if err := syscall.Setuid(int(v.UID)); err != nil {
		return initFail(fmt.Errorf("set uid %d: %w", v.UID, err))
	}
	err = syscall.Exec(path, argv, env)
	return initFail(fmt.Errorf("exec %s: %w", path, err))
}

// mount makes the calling (locked) thread's mount namespace the view's.
func (v ProxyView) mount() error {
	if err := unix.Unshare(unix.CLONE_FS | unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("proxy view: unshare: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("proxy view: make / private: %w", err)
	}
	scratchMounted := false
	overlaid := map[string]bool{}
	for i, b := range v.Mounts {
		dst := filepath.Clean(b.Dst)
		if _, err := os.Stat(dst); errors.Is(err, os.ErrNotExist) {
			above := filepath.Dir(dst)
			for ; above != "/"; above = filepath.Dir(above) {
				if _, err := os.Stat(above); err == nil {
					break
				}
			}
			if above == "/" {
				return fmt.Errorf("proxy view: mount on %s: no directory above it to lay an overlay on but /", dst)
			}
			if !overlaid[above] {
				if !scratchMounted {
					if err := os.MkdirAll(v.Scratch, 0o700); err != nil {
						return fmt.Errorf("proxy view: %w", err)
					}
					if err := unix.Mount("tmpfs", v.Scratch, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=700"); err != nil {
						return fmt.Errorf("proxy view: mount tmpfs on %s: %w", v.Scratch, err)
					}
					scratchMounted = true
				}
				upper, work := filepath.Join(v.Scratch, fmt.Sprint(i), "upper"), filepath.Join(v.Scratch, fmt.Sprint(i), "work")
				for _, d := range []string{upper, work} {
					if err := os.MkdirAll(d, 0o755); err != nil {
						return fmt.Errorf("proxy view: %w", err)
					}
				}
				if err := unix.Mount("overlay", above, "overlay", 0, "lowerdir="+above+",upperdir="+upper+",workdir="+work); err != nil {
					return fmt.Errorf("proxy view: overlay on %s: %w", above, err)
				}
				overlaid[above] = true
			}
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return fmt.Errorf("proxy view: make %s: %w", dst, err)
			}
		}
		if err := unix.Mount(b.Src, dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("proxy view: bind %s on %s: %w", b.Src, dst, err)
		}
	}
	return nil
}
