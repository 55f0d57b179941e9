package caops

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/ca"
)

// EventCAPlugged is the CA signing with a plugged-in intermediate (the cacerts Secret).
const EventCAPlugged = "ca.plugged"

// PlugIn makes the CA sign with the plugged-in CA of a cacerts Secret (files holds its
// data by key: ca-cert.pem, ca-key.pem, cert-chain.pem, root-cert.pem), as istiod
// signs with the /etc/cacerts it mounts from that Secret, and has every agent renew, so
// that every workload serves [leaf, cert-chain.pem..., root-cert.pem] and trusts
// root-cert.pem alone. The same files plugged in again change nothing. Bad files are
// refused, naming the file, and the CA is left as it was; a root rotation under way is
// refused (both wrap api.ErrCARequest).
func (c *CA) PlugIn(ctx context.Context, files map[string][]byte) error {
	sum := pluggedSum(files)
	if !c.mu.TryLock() {
		return fmt.Errorf("plug in CA: %w: a root rotation is running", api.ErrCARequest)
	}
	defer c.mu.Unlock()
	if c.plugged == sum {
		return nil
	}
	p, err := ca.ParsePlugged(files, time.Now())
	if err != nil {
		return fmt.Errorf("plug in CA: %w: %w", api.ErrCARequest, err)
	}
	if err := c.ca.Plug(p); err != nil {
		return fmt.Errorf("plug in CA: %w: %w", api.ErrCARequest, err)
	}
	c.plugged = sum
	var roots bytes.Buffer
	for _, r := range p.Roots {
		roots.Write((&ca.Root{Cert: r}).CertPEM())
	}
	if err := os.WriteFile(filepath.Join(c.cfg.Dir, CertFile), roots.Bytes(), 0o644); err != nil {
		return fmt.Errorf("plug in CA: write root certificate: %w", err)
	}
	c.deps.Publish(EventCAPlugged, "", fmt.Sprintf("the CA signs with %q under %q (the cacerts Secret)", p.Signing.Cert.Subject.String(), p.Roots[0].Subject.String()),
		map[string]any{"signing": ca.Info(p.Signing.Cert).Serial, "roots": len(p.Roots)})
	return c.renewAll(ctx, "renew", nil)
}

// PluggedIn reports whether the CA signs with a plugged-in intermediate.
func (c *CA) PluggedIn() bool { return c.ca.PluggedIn() }

// pluggedSum identifies a cacerts Secret's four files.
func pluggedSum(files map[string][]byte) [sha256.Size]byte {
	h := sha256.New()
	for _, f := range []string{ca.PluggedCertFile, ca.PluggedKeyFile, ca.PluggedChainFile, ca.PluggedRootFile} {
		fmt.Fprintf(h, "%s %d\n", f, len(files[f]))
		h.Write(files[f])
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}
