package caops

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/ca"
)

// cacertsFiles is a cacerts Secret's data: an intermediate (a cross certificate of a
// root made for it, signed by that root) with cert-chain.pem the intermediate then the
// root.
func cacertsFiles(t *testing.T) (map[string][]byte, *ca.Root) {
	t.Helper()
	root, err := ca.NewNamedRoot(ca.DefaultTrustDomain, "Root CA", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	inter, err := ca.NewNamedRoot(ca.DefaultTrustDomain, "Intermediate CA", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c, err := ca.New(ca.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	signed, err := c.AddRoot(inter) // root certifies the intermediate's key and subject
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := inter.WriteFiles(filepath.Join(dir, "c"), filepath.Join(dir, "k")); err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(filepath.Join(dir, "k"))
	if err != nil {
		t.Fatal(err)
	}
	interPEM := (&ca.Root{Cert: signed}).CertPEM()
	return map[string][]byte{
		ca.PluggedCertFile: interPEM, ca.PluggedKeyFile: key,
		ca.PluggedChainFile: append(slices.Clone(interPEM), root.CertPEM()...), ca.PluggedRootFile: root.CertPEM(),
	}, root
}

// TestPlugIn: the CA takes a cacerts Secret's intermediate, says so, and every agent
// renews from it; the run directory's root is the plugged-in root. The same files again
// change nothing; bad ones are refused and leave the CA as it is; root rotations are
// refused once plugged in.
func TestPlugIn(t *testing.T) {
	t.Parallel()
	f := newFakeLab(t)
	c := newCA(t, f, false)
	files, root := cacertsFiles(t)
	ctx := context.Background()

	bad := map[string][]byte{ca.PluggedCertFile: files[ca.PluggedCertFile]}
	if err := c.PlugIn(ctx, bad); !errors.Is(err, api.ErrCARequest) {
		t.Fatalf("PlugIn of a Secret without ca-key.pem: %v, want ErrCARequest", err)
	}
	if c.PluggedIn() || len(f.kinds()) != 0 {
		t.Fatalf("a refused cacerts changed the CA (plugged %v, events %q)", c.PluggedIn(), f.kinds())
	}

	if err := c.PlugIn(ctx, files); err != nil {
		t.Fatal(err)
	}
	if got, want := sortedRuns(f.kinds()), append([]string{EventCAPlugged}, renewed...); !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	f.mu.Lock()
	st := f.certs["frontend"]
	f.mu.Unlock()
	if st.Issuer != "Intermediate CA" || len(st.Intermediates) != 1 {
		t.Errorf("frontend's certificate after the plug-in: issuer %q, intermediates %+v; want the intermediate", st.Issuer, st.Intermediates)
	}
	if b, err := os.ReadFile(filepath.Join(c.cfg.Dir, CertFile)); err != nil || string(b) != string(root.CertPEM()) {
		t.Errorf("run directory's %s = %q (%v), want the plugged-in root", CertFile, b, err)
	}

	n := len(f.kinds())
	if err := c.PlugIn(ctx, files); err != nil || len(f.kinds()) != n {
		t.Errorf("the same cacerts again: %v, events %q", err, f.kinds()[n:])
	}
	if err := c.RotateRoot(ctx); !errors.Is(err, ca.ErrPlugged) || !errors.Is(err, api.ErrCARequest) {
		t.Errorf("RotateRoot of a plugged-in CA: %v, want it refused (ErrPlugged)", err)
	}
}
