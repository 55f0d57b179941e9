package lab

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/meshlab/meshlab/controlplane/ca"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/web"
)

// caLab is a Lab with a CA and no pods: enough for the CA's own steps and events.
func caLab(t *testing.T, userRoot bool) *Lab {
	t.Helper()
	root, err := ca.NewRoot(ca.DefaultTrustDomain, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	authority, err := ca.New(ca.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	paths := PathsFor(t.TempDir(), "calab")
	if err := os.MkdirAll(paths.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	l := &Lab{paths: paths, log: testutil.Logger(t), bus: NewBus(100), model: model.New(nil, nil),
		ca: &labCA{ca: authority, tokens: ca.NewTokens()}}
	if userRoot {
		l.opts.CACertFile, l.opts.CAKeyFile = "user-cert.pem", "user-key.pem"
	}
	return l
}

func kinds(b *Bus) []string {
	var out []string
	for _, e := range b.Recent() {
		out = append(out, e.Kind)
	}
	return out
}

func TestRotateRootStepsAndEvents(t *testing.T) {
	t.Parallel()
	l := caLab(t, false)
	old := l.ca.ca.State().Signing.Serial
	if err := l.RotateRoot(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := l.ca.ca.State()
	if st.Phase != ca.PhaseStable || st.Signing.Serial == old || len(st.Bundle) != 1 {
		t.Fatalf("state after rotation %+v", st)
	}
	want := []string{EventCARootAdded, EventCABundlePushed, EventCASigningSwitch, EventCAOldRootDropped, EventCARotated}
	if got := kinds(l.bus); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	fi, err := os.Stat(filepath.Join(l.paths.Dir, "ca-root-2-key.pem"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("new root key: %v %v, want 0600", fi, err)
	}
	r, err := ca.LoadRoot(filepath.Join(l.paths.Dir, caCertFile), filepath.Join(l.paths.Dir, caKeyFile))
	if err != nil || ca.Info(r.Cert).Serial != st.Signing.Serial {
		t.Fatalf("run directory root is not the new one: %v", err)
	}
}

func TestRotateUserRootNeedsTheNewOne(t *testing.T) {
	t.Parallel()
	l := caLab(t, true)
	err := l.RotateRoot(context.Background())
	if !errors.Is(err, web.ErrCARequest) {
		t.Fatalf("RotateRoot of a user-supplied root = %v, want ErrCARequest", err)
	}
	if l.ca.ca.State().Phase != ca.PhaseStable {
		t.Fatal("a refused rotation changed the CA")
	}
	if err := l.RotateRootWith(context.Background(), []byte("junk"), []byte("junk")); !errors.Is(err, web.ErrCARequest) {
		t.Fatalf("RotateRootWith(junk) = %v, want ErrCARequest", err)
	}
	next, err := ca.NewNamedRoot(ca.DefaultTrustDomain, "user root 2", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(t.TempDir(), "k.pem")
	cert := filepath.Join(t.TempDir(), "c.pem")
	if err := next.WriteFiles(cert, key); err != nil {
		t.Fatal(err)
	}
	certPEM, _ := os.ReadFile(cert)
	keyPEM, _ := os.ReadFile(key)
	if err := l.RotateRootWith(context.Background(), certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	if got := l.ca.ca.State().Signing.Subject; got != "user root 2" {
		t.Fatalf("signing root %q, want the user's", got)
	}
}

func TestCAClockOffsetEvent(t *testing.T) {
	t.Parallel()
	l := caLab(t, false)
	l.SetCAClockOffset(-25 * time.Hour)
	if l.ca.ca.ClockOffset() != -25*time.Hour {
		t.Fatal("offset not set")
	}
	l.SetCAClockOffset(0)
	ev := l.bus.Recent()
	if len(ev) != 2 || ev[0].Kind != EventCAClock || ev[0].Fields["offset"] != "-25h0m0s" || ev[1].Message != "CA clock reset" {
		t.Fatalf("events %+v", ev)
	}
	if err := l.PauseCertRenewal("nope", true); !errors.Is(err, web.ErrUnknownPod) {
		t.Fatalf("PauseCertRenewal(unknown) = %v", err)
	}
}
