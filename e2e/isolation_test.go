package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
	"github.com/meshlab/meshlab/netns"
)

// buildProbe builds testdata/isoprobe into a directory every app uid can enter.
func buildProbe(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "isoprobe")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/isoprobe").CombinedOutput(); err != nil {
		t.Fatalf("build isoprobe: %v\n%s", err, out)
	}
	return bin
}

func labRecord(t *testing.T, name string) *lab.Record {
	t.Helper()
	r, err := lab.ReadRecord(lab.PathsFor(lab.DefaultRunRoot, name))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func podRecord(t *testing.T, r *lab.Record, pod string) lab.PodRecord {
	t.Helper()
	for _, p := range r.Pods {
		if p.Name == pod {
			return p
		}
	}
	t.Fatalf("lab %s has no pod %s", r.Name, pod)
	return lab.PodRecord{}
}

// appPID is the pid (in the host's PID namespace) of the process running as uid.
func appPID(t *testing.T, uid uint32) int {
	t.Helper()
	statuses, _ := filepath.Glob("/proc/[0-9]*/status")
	for _, s := range statuses {
		b, err := os.ReadFile(s)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" && f[1] == strconv.FormatUint(uint64(uid), 10) {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(s)))
				return pid
			}
		}
	}
	t.Fatalf("no process runs as app uid %d", uid)
	return 0
}

// linkLocal is the EUI-64 IPv6 link-local address the kernel would give a link with mac.
func linkLocal(mac net.HardwareAddr) netip.Addr {
	var a [16]byte
	a[0], a[1] = 0xfe, 0x80
	copy(a[8:], []byte{mac[0] ^ 0x02, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]})
	return netip.AddrFrom16(a)
}

// TestPodIsolation runs every probe of issue 17 from inside a pod, as its app runs (meshlab
// exec: the app's namespaces, uid and restrictions), against another pod of its lab and a
// pod of another lab, and checks that each fails.
func TestPodIsolation(t *testing.T) {
	testutil.RequireRoot(t)
	// Not parallel (tparallel): its subtests share the test's labs and run one after another.
	probe := buildProbe(t)
	a, b := startLab(t), startLab(t)
	ra, rb := labRecord(t, a.name), labRecord(t, b.name)
	front, back := podRecord(t, ra, "frontend-v1"), podRecord(t, ra, "backend-v1")
	otherBack := podRecord(t, rb, "backend-v1")

	run := func(t *testing.T, args ...string) string {
		t.Helper()
		out, err := meshlab(t, append([]string{"exec", "--name", a.name, front.Name, "--", probe}, args...)...)
		if err != nil {
			t.Fatalf("isoprobe %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(out)
	}
	mustFail := func(t *testing.T, args ...string) {
		t.Helper()
		if out := run(t, args...); !strings.HasPrefix(out, "ERR ") {
			t.Errorf("isoprobe %v from %s succeeded: %s", args, front.Name, out)
		}
	}

	t.Run("every app has its own uid", func(t *testing.T) {
		seen := map[uint32]string{}
		for _, r := range []*lab.Record{ra, rb} {
			for _, p := range r.Pods {
				who := r.Name + "/" + p.Name
				if p.AppUID == 0 || p.AppUID == lab.ProxyUID || p.AppUID == lab.AppUID {
					t.Errorf("%s: app uid %d", who, p.AppUID)
				}
				if other, dup := seen[p.AppUID]; dup {
					t.Errorf("%s and %s share app uid %d", who, other, p.AppUID)
				}
				seen[p.AppUID] = who
			}
		}
	})
	t.Run("confined as the app", func(t *testing.T) {
		out := run(t, "status")
		u := strconv.FormatUint(uint64(front.AppUID), 10)
		for _, want := range []string{
			"Uid:\t" + u + "\t" + u + "\t" + u + "\t" + u,
			"NoNewPrivs:\t1", "Seccomp:\t2", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("status in %s lacks %q:\n%s", front.Name, want, out)
			}
		}
	})
	t.Run("sees only its pod's processes", func(t *testing.T) {
		out := run(t, "pids")
		f := strings.Fields(strings.TrimPrefix(out, "PIDS "))
		if len(f) == 0 || f[0] != "1" || len(f) > 4 {
			t.Errorf("%s sees pids %v, want its PID namespace's init (1) and itself", front.Name, f)
		}
	})
	for _, target := range []struct {
		name string
		pid  int
	}{
		{"another pod's app", appPID(t, back.AppUID)},
		{"another lab's app", appPID(t, otherBack.AppUID)},
	} {
		t.Run("cannot reach "+target.name, func(t *testing.T) {
			pid := strconv.Itoa(target.pid)
			for _, probe := range []string{"kill", "mem", "pidfd-getfd", "ptrace", "vm-read"} {
				mustFail(t, probe, pid)
			}
		})
	}
	t.Run("seccomp refuses what no_new_privs alone allows", func(t *testing.T) {
		// On itself these succeed for any process: only the filter refuses them.
		for _, p := range []string{"pidfd-getfd", "vm-read"} {
			if out := run(t, p, "self"); !strings.Contains(out, "operation not permitted") {
				t.Errorf("isoprobe %s self: %s, want EPERM from the seccomp filter", p, out)
			}
		}
	})
	t.Run("exec --privileged is root in the network namespace only", func(t *testing.T) {
		out, err := meshlab(t, "exec", "--name", a.name, "--privileged", front.Name, "--", "iptables-save", "-t", "nat")
		if err != nil || !strings.Contains(out, "ISTIO_REDIRECT") {
			t.Errorf("exec --privileged iptables-save in %s: %v\n%s", front.Name, err, out)
		}
		if out, err := meshlab(t, "exec", "--name", a.name, front.Name, "--", "iptables-save", "-t", "nat"); err == nil {
			t.Errorf("iptables-save as %s's app succeeded:\n%s", front.Name, out)
		}
	})
	t.Run("cannot read other pods' files", func(t *testing.T) {
		var files []string
		for _, dir := range []string{
			lab.PathsFor(lab.DefaultRunRoot, a.name).PodDir(back.Name),
			lab.PathsFor(lab.DefaultRunRoot, b.name).PodDir(otherBack.Name),
			lab.PathsFor(lab.DefaultRunRoot, a.name).PodDir(front.Name), // its sidecar's: the agent's, not the app's
		} {
			es, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range es {
				if e.Type().IsRegular() {
					files = append(files, filepath.Join(dir, e.Name()))
				}
			}
		}
		joined := strings.Join(files, " ")
		if !strings.Contains(joined, "envoy-rev0.json") || !strings.Contains(joined, ".log") {
			t.Fatalf("pod directories hold no envoy-rev0.json or log to probe: %v", files)
		}
		for _, f := range files {
			mustFail(t, "read", f)
		}
		mustFail(t, "read", lab.PathsFor(lab.DefaultRunRoot, a.name).Record())
	})
	t.Run("no address the capture rules do not cover", func(t *testing.T) {
		out := run(t, "addrs")
		if !strings.Contains(out, "ADDR "+front.IP.String()+"/") {
			t.Errorf("addresses of %s lack its IP %s:\n%s", front.Name, front.IP, out)
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, ":") {
				t.Errorf("%s has an IPv6 address: %s", front.Name, line)
			}
		}
		// The backend's would-be link-local address, straight to its app's port.
		var mac net.HardwareAddr
		err := netns.Do(back.NetNS, func() error {
			l, err := netlink.LinkByName(netns.DefaultPodIfName)
			if err != nil {
				return err
			}
			mac = l.Attrs().HardwareAddr
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		target := fmt.Sprintf("[%s%%%s]:8080", linkLocal(mac), netns.DefaultPodIfName)
		mustFail(t, "dial", target)
		mustFail(t, "dial", "[::1]:8080")
	})
}

// TestCleanRefusesLiveLabAndIPNetnsBeside checks that clean refuses a running lab (which
// keeps serving), that `ip netns add`/`delete` of an unrelated namespace beside the lab
// leaves `down` working, and that down then removes everything.
func TestCleanRefusesLiveLabAndIPNetnsBeside(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t)
	out, err := meshlab(t, "clean", "--name", l.name)
	if err == nil || !strings.Contains(out, "is running") || !strings.Contains(out, "--force") {
		t.Fatalf("clean of a running lab: %v\n%s\nwant a refusal naming down and --force", err, out)
	}
	if out, err := meshlab(t, "exec", "--name", l.name, "frontend-v1", "--", "curl", "-sS", "--max-time", "5", "http://backend:8080/"); err != nil {
		t.Fatalf("request after the refused clean: %v\n%s", err, out)
	}
	if out, err := meshlab(t, "clean", "--name", "zz"+l.name); err == nil || !strings.Contains(out, l.name) {
		t.Errorf("clean of a lab that never existed: %v\n%s\nwant an error listing %s", err, out, l.name)
	}

	ip, err := exec.LookPath("ip")
	if err != nil {
		t.Skip("iproute2's ip is not installed")
	}
	other := "mltest-" + testutil.UniqueName(t)
	t.Cleanup(func() { _ = netns.Delete(other) })
	for _, args := range [][]string{{"netns", "add", other}, {"netns", "list"}, {"netns", "delete", other}} {
		// Other tests make and delete namespaces meanwhile: a name caught between its file
		// and its bind mount lists as "Peer netns reference is invalid" for a moment. Only
		// an error that stays is this lab's doing.
		var out []byte
		var err error
		for try := 0; try < 5; try++ {
			out, err = exec.Command(ip, args...).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "invalid") {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil || strings.Contains(string(out), "invalid") {
			t.Fatalf("ip %v: %v\n%s", args, err, out)
		}
	}
	if out, err := meshlab(t, "down", "--name", l.name); err != nil {
		t.Fatalf("down after ip netns add/delete beside the lab: %v\n%s", err, out)
	}
	<-l.exited
	assertNothingLeft(t, l.name)
}
