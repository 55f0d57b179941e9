package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/ca"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
	"github.com/meshlab/meshlab/lab/caops"
	"github.com/meshlab/meshlab/web"
)

// tokenFile is the pod's CA bearer token in its run directory (0600, root): only the
// agent reads it.
const tokenFile = "token"

// caConfig is the lab's CA as its options ask for it.
func (o *Options) caConfig(dir string) caops.Config {
	return caops.Config{Dir: dir, UserCertFile: o.CACertFile, UserKeyFile: o.CAKeyFile, TTL: o.CertTTL}
}

// startCA makes the lab's CA (lab/caops) and returns the function that serves it on the
// discovery server's gRPC server.
func (l *Lab) startCA() (func(*grpc.Server), error) {
	c, err := caops.Start(l.opts.caConfig(l.paths.Dir), l.below())
	if err != nil {
		return nil, err
	}
	l.ca = c
	c.Authority().SetTrustDomain(l.model.Mesh.TrustDomain) // the mesh config's, as istiod's CA reads it
	return c.Register(l.log.With("component", "ca")), nil
}

var _ web.CABackend = (*Lab)(nil)

// errNoCA is the answer of a lab without a CA (a bare Lab in unit tests).
func errNoCA(op string) error { return fmt.Errorf("%s: %w: the lab has no CA", op, api.ErrCARequest) }

// RotateRoot rotates the lab CA to a new root it makes (lab/caops); a lab whose root the
// user supplied refuses it.
func (l *Lab) RotateRoot(ctx context.Context) error { return l.RotateRootWith(ctx, nil, nil) }

// RotateRootWith implements web.CABackend (lab/caops).
func (l *Lab) RotateRootWith(ctx context.Context, certPEM, keyPEM []byte) error {
	if l.ca == nil {
		return errNoCA("rotate root")
	}
	return l.ca.RotateRootWith(ctx, certPEM, keyPEM)
}

// RenewCerts implements web.CABackend: every agent whose renewal is not paused renews now.
func (l *Lab) RenewCerts(ctx context.Context) error {
	if l.ca == nil {
		return errNoCA("renew certificates")
	}
	return l.ca.RenewCerts(ctx)
}

// SetCAClockOffset implements web.CABackend: the CA's clock is shifted by d for the
// certificates it issues from now on; 0 resets it.
func (l *Lab) SetCAClockOffset(d time.Duration) {
	if l.ca != nil {
		l.ca.SetClockOffset(d)
	}
}

// PauseCertRenewal implements web.CABackend: the pod agent's renewal is paused (or resumed).
func (l *Lab) PauseCertRenewal(pod string, paused bool) error {
	if l.ca == nil {
		return errNoCA("pause certificate renewal")
	}
	return l.ca.PauseCertRenewal(context.Background(), pod, paused)
}

// CAStatus implements web.CABackend.
func (l *Lab) CAStatus(ctx context.Context) (api.CAStatus, error) {
	if l.ca == nil {
		return api.CAStatus{}, errNoCA("ca status")
	}
	return l.ca.Status(ctx), nil
}

// tokenPath is where the pod's CA token lives.
func (l *Lab) tokenPath(pod string) string { return filepath.Join(l.paths.PodDir(pod), tokenFile) }

// writePodToken issues the pod's CA token and writes it, mode 0600 and owned by the lab
// (root), so the agent can read it and the app (uid 65532) cannot.
func (l *Lab) writePodToken(p *model.Pod) error {
	tok, err := l.ca.Tokens().Issue(ca.Caller{Pod: p.Key(), Identity: ca.Identity{Namespace: p.Namespace, ServiceAccount: p.ServiceAccount}})
	if err != nil {
		return fmt.Errorf("issue CA token of pod %s: %w", p.Name, err)
	}
	f, err := os.OpenFile(l.tokenPath(p.Key()), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write CA token of pod %s: %w", p.Name, err)
	}
	_, werr := f.WriteString(tok)
	if err := f.Chmod(0o600); werr == nil {
		werr = err
	}
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr != nil {
		return fmt.Errorf("write CA token of pod %s: %w", p.Name, werr)
	}
	return nil
}

// workloadCert converts the agent's certificate status to the API's shape.
func workloadCert(c *agentapi.CertStatus) *api.WorkloadCert {
	if c == nil {
		return nil
	}
	return &api.WorkloadCert{SPIFFEID: c.SPIFFEID, Serial: c.Serial, NotBefore: c.NotBefore, NotAfter: c.NotAfter,
		RotateAt: c.RotateAt, Rotations: c.Rotations, Error: c.Error,
		Trust: &api.CertTrust{Issuer: c.Issuer, IssuerKeyID: c.IssuerKeyID, Intermediates: certRefs(c.Intermediates),
			TrustBundle: certRefs(c.TrustBundle), Paused: c.Paused, ErrorAt: c.ErrorAt}}
}

func certRefs(rs []agentapi.CertRef) []api.CARef {
	var out []api.CARef
	for _, r := range rs {
		out = append(out, api.CARef{Serial: r.Serial, Subject: r.Subject, KeyID: r.KeyID, NotAfter: r.NotAfter})
	}
	return out
}
