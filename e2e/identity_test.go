package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
)

// TestEveryPodGetsItsIdentity: each pod's agent holds a certificate for exactly its own
// SPIFFE identity, and the token it proved itself with is readable by root only (the app
// runs as uid 65532 and must not be able to ask the CA for the pod's identity).
func TestEveryPodGetsItsIdentity(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t)
	paths := lab.PathsFor(lab.DefaultRunRoot, l.name)
	c := api.NewUnixClient(paths.APISocket())
	defer c.Close()
	for pod, sa := range map[string]string{"frontend-v1": "frontend", "backend-v1": "backend", "backend-v2": "backend"} {
		var d api.PodDetail
		deadline := time.Now().Add(10 * time.Second)
		for {
			var err error
			d, err = c.PodDetail(t.Context(), pod)
			if err == nil && d.Proxy != nil && d.Proxy.Cert != nil && d.Proxy.Cert.Serial != "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no certificate after 10s (detail %+v, err %v)", pod, d.Proxy, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if want := "spiffe://cluster.local/ns/default/sa/" + sa; d.Proxy.Cert.SPIFFEID != want {
			t.Errorf("%s: SPIFFE ID %q, want %q", pod, d.Proxy.Cert.SPIFFEID, want)
		}
		if !d.Proxy.Cert.NotAfter.After(time.Now()) {
			t.Errorf("%s: certificate expired at %v", pod, d.Proxy.Cert.NotAfter)
		}

		token := filepath.Join(paths.PodDir(pod), "token")
		info, err := os.Stat(token)
		if err != nil {
			t.Fatal(err)
		}
		st := info.Sys().(*syscall.Stat_t)
		if info.Mode().Perm() != 0o600 || st.Uid != 0 {
			t.Errorf("%s: token mode %v owner %d, want 0600 root", pod, info.Mode().Perm(), st.Uid)
		}
		// As the app's uid, reading it fails.
		cat := exec.Command("cat", token)
		cat.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: lab.AppUID, Gid: lab.AppUID}}
		if out, err := cat.CombinedOutput(); err == nil {
			t.Errorf("%s: uid %d read the token: %q", pod, lab.AppUID, out)
		}
	}
}
