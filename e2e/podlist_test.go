package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
	"github.com/meshlab/meshlab/netns"
)

// TestFirstPodListAsksNoAgent: the first pod list after `up` (what `meshlab status`, `get
// pods` and the dashboard ask) answers from what the lab's own ready wait read of each
// sidecar, asking no agent. Every agent of the lab is stopped (SIGSTOP) once it is up: a
// list that asked one would wait for it and report its pod "agent unreachable" after the
// pod list's timeout. It did for every pod until the wait's answer was held across the
// proxy's stream opening during the wait and the lab's pod.ready after it (9 s for the
// first `status` of a 500-pod lab).
func TestFirstPodListAsksNoAgent(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	scenario := filepath.Join(t.TempDir(), "scale.yaml")
	if err := os.WriteFile(scenario, []byte(scaleScenario(4)), 0o644); err != nil {
		t.Fatal(err)
	}
	l := startLab(t, "--listen", "", scenario)
	stopped := 0
	for _, pid := range agentPIDs(t, l.name) {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatalf("stop agent %d: %v", pid, err)
		}
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) }) // before the lab's cleanup stops it
		stopped++
	}
	if stopped != 4 {
		t.Fatalf("%d agents found in lab %s, want 4", stopped, l.name)
	}
	lc := api.NewUnixClient(lab.PathsFor(lab.DefaultRunRoot, l.name).APISocket())
	t.Cleanup(lc.Close)
	pods, err := lc.Pods(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 4 {
		t.Fatalf("%d pods listed, want 4: %+v", len(pods), pods)
	}
	for _, p := range pods {
		if !p.Ready || p.Epoch != 0 || p.Message != "" {
			t.Errorf("pod %s: ready %v, epoch %d, message %q; want ready on epoch 0 from what up's wait read, its agent not asked",
				p.Key, p.Ready, p.Epoch, p.Message)
		}
	}
}

// agentPIDs returns the pids of the pod agents (`meshlab agent`) of lab name, found in
// its pods' network namespaces.
func agentPIDs(t *testing.T, name string) []int {
	t.Helper()
	nss, err := netns.List("ml-" + name + "-")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, ns := range nss {
		for _, f := range strings.Fields(pidsIn(t, ns)) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("ip netns pids %s: %q", ns, f)
			}
			argv, err := os.ReadFile("/proc/" + f + "/cmdline")
			if err != nil {
				continue // it exited meanwhile
			}
			if args := bytes.Split(argv, []byte{0}); len(args) > 1 && string(args[1]) == "agent" {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}
