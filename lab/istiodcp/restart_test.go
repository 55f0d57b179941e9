package istiodcp

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/meshlab/meshlab/controlplane/model"
)

// TestMain runs the test binary as a stand-in istiod when asked (fakeIstiodEnv): it
// serves the feed socket's /healthz, /version (its PILOT_ENABLE_AMBIENT) and PUT /state,
// listens on the ADS socket, and ends on SIGTERM.
func TestMain(m *testing.M) {
	if os.Getenv(fakeIstiodEnv) == "1" {
		fakeIstiod()
		return
	}
	os.Exit(m.Run())
}

const fakeIstiodEnv = "MESHLAB_TEST_FAKE_ISTIOD"

func fakeIstiod() {
	fs := flag.NewFlagSet("istiod", flag.ExitOnError)
	xdsSock, feedSock := fs.String("xds", "", ""), fs.String("feed", "", "")
	fs.String("state", "", "")
	fs.String("mesh", "", "")
	_ = fs.Parse(os.Args[1:])
	for _, p := range []string{*xdsSock, *feedSock} {
		_ = os.Remove(p)
	}
	xln, err := net.Listen("unix", *xdsSock)
	if err != nil {
		os.Exit(3)
	}
	defer xln.Close()
	ln, err := net.Listen("unix", *feedSock)
	if err != nil {
		os.Exit(3)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {})
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "ambient=%s\n", os.Getenv("PILOT_ENABLE_AMBIENT"))
	})
	mux.HandleFunc("PUT /state", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "0 changes") })
	go func() { _ = http.Serve(ln, mux) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	<-sig
}

// An istiod started without ambient is restarted with it, once, by the first feed of a
// lab that turned ambient; the old process is gone, the restart is no exit.
func TestFeedRestartsIstiodWhenTheLabTurnsAmbient(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(fakeIstiodEnv, "1")
	dir, err := os.MkdirTemp("", "icp") // short: a unix socket path
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	var exits, restarts atomic.Int32
	d, err := Start(t.Context(), Options{Path: self, Dir: dir, Model: testModel(), Node: "ml-t-node",
		OnExit:    func(error) { exits.Add(1) },
		OnRestart: func(string, int) { restarts.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	version := func() string {
		t.Helper()
		v, err := d.Version(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := version(); v != "ambient=false" {
		t.Fatalf("istiod of a sidecar lab: %s", v)
	}
	first := d.PID()
	if err := d.Feed(t.Context(), testModel()); err != nil || d.PID() != first {
		t.Fatalf("a sidecar lab's feed: %v, pid %d -> %d", err, first, d.PID())
	}
	m := testModel()
	m.Namespaces = []*model.Namespace{{Name: "default", Labels: map[string]string{model.LabelDataplaneMode: model.DataplaneModeAmbient}}}
	if err := d.Feed(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	if v := version(); v != "ambient=true" || d.PID() == first || restarts.Load() != 1 {
		t.Errorf("after the lab turned ambient: %s, pid %d (was %d), %d restarts; want ambient=true in a new process, one restart", v, d.PID(), first, restarts.Load())
	}
	if err := syscall.Kill(first, 0); err == nil {
		t.Errorf("the first istiod (pid %d) still runs", first)
	}
	second := d.PID()
	if err := d.Feed(t.Context(), m); err != nil || d.PID() != second || restarts.Load() != 1 {
		t.Errorf("a later ambient feed: %v, pid %d -> %d, %d restarts; want no restart", err, second, d.PID(), restarts.Load())
	}
	if !d.Running() || exits.Load() != 0 {
		t.Errorf("running %v, %d exits reported; want running, none", d.Running(), exits.Load())
	}
	d.Stop()
	if d.Running() || exits.Load() != 0 {
		t.Errorf("after Stop: running %v, %d exits reported; want stopped, none", d.Running(), exits.Load())
	}
}

// A changed trust domain (or aliases) restarts istiod, keeping ambient as it was; a feed
// of the same trust domains does not; Restart (rollout restart) replaces the process.
func TestFeedRestartsIstiodWhenTheTrustDomainChanges(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(fakeIstiodEnv, "1")
	dir, err := os.MkdirTemp("", "icp") // short: a unix socket path
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	var restarts atomic.Int32
	d, err := Start(t.Context(), Options{Path: self, Dir: dir, Model: testModel(), Node: "ml-t-node",
		OnRestart: func(string, int) { restarts.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	first := d.PID()
	m := testModel()
	m.Mesh.TrustDomain = "old-td"
	if err := d.Feed(t.Context(), m); err != nil || d.PID() == first || restarts.Load() != 1 {
		t.Fatalf("trust domain old-td: %v, pid %d (was %d), %d restarts; want a new process", err, d.PID(), first, restarts.Load())
	}
	second := d.PID()
	if err := d.Feed(t.Context(), m); err != nil || d.PID() != second || restarts.Load() != 1 {
		t.Errorf("the same trust domain again: %v, pid %d -> %d, %d restarts; want no restart", err, second, d.PID(), restarts.Load())
	}
	m.Mesh.TrustDomain, m.Mesh.TrustDomainAliases = "new-td", []string{"old-td"}
	if err := d.Feed(t.Context(), m); err != nil || d.PID() == second || restarts.Load() != 2 {
		t.Errorf("new-td with alias old-td: %v, pid %d (was %d), %d restarts", err, d.PID(), second, restarts.Load())
	}
	third := d.PID()
	if err := d.Restart(t.Context(), m, "rollout restart"); err != nil || d.PID() == third || restarts.Load() != 3 {
		t.Errorf("Restart: %v, pid %d (was %d), %d restarts", err, d.PID(), third, restarts.Load())
	}
	if v, err := d.Version(t.Context()); err != nil || v != "ambient=false" {
		t.Errorf("after the restarts: %s, %v; want ambient off as before", v, err)
	}
}
