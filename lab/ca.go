package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"

	"github.com/meshlab/meshlab/controlplane/ca"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/dataplane/agent"
	"github.com/meshlab/meshlab/web"
)

// File names of the CA in the lab's run directory and of the token in a pod's.
const (
	caCertFile = "ca-cert.pem" // the root certificate (0644)
	caKeyFile  = "ca-key.pem"  // its key (0600), only when the lab made the root
	tokenFile  = "token"       // the pod's CA bearer token (0600, root): only the agent reads it
)

// labCA is the lab's CA and the tokens it accepts.
type labCA struct {
	ca     *ca.CA
	tokens *ca.Tokens
	rot    caRotation // lab/carotate.go
}

// checkCAOptions reports whether the user-supplied root (if any) loads, before anything
// is created.
func checkCAOptions(o *Options) error {
	if (o.CACertFile == "") != (o.CAKeyFile == "") {
		return fmt.Errorf("--ca-cert and --ca-key go together")
	}
	if o.CertTTL != 0 && o.CertTTL < ca.MinTTL {
		return fmt.Errorf("cert ttl %s is below the minimum %s", o.CertTTL, ca.MinTTL)
	}
	if o.CACertFile == "" {
		return nil
	}
	if _, err := ca.LoadRoot(o.CACertFile, o.CAKeyFile); err != nil {
		return fmt.Errorf("load --ca-cert/--ca-key: %w", err)
	}
	return nil
}

// startCA makes the lab's CA: the user's root, or a new one whose key is written 0600
// in the run directory; the root certificate is written there either way. It returns
// the function that serves the CA on the discovery server's gRPC server.
func (l *Lab) startCA() (func(*grpc.Server), error) {
	var (
		root *ca.Root
		err  error
	)
	certPath := filepath.Join(l.paths.Dir, caCertFile)
	if l.opts.CACertFile != "" {
		if root, err = ca.LoadRoot(l.opts.CACertFile, l.opts.CAKeyFile); err != nil {
			return nil, fmt.Errorf("start CA: %w", err)
		}
		if err := os.WriteFile(certPath, root.CertPEM(), 0o644); err != nil {
			return nil, fmt.Errorf("start CA: write root certificate: %w", err)
		}
	} else {
		if root, err = ca.NewRoot(ca.DefaultTrustDomain, time.Now()); err != nil {
			return nil, fmt.Errorf("start CA: %w", err)
		}
		if err := root.WriteFiles(certPath, filepath.Join(l.paths.Dir, caKeyFile)); err != nil {
			return nil, fmt.Errorf("start CA: %w", err)
		}
	}
	authority, err := ca.New(ca.Options{Root: root, TTL: l.opts.CertTTL})
	if err != nil {
		return nil, fmt.Errorf("start CA: %w", err)
	}
	l.ca = &labCA{ca: authority, tokens: ca.NewTokens()}
	svc := ca.NewService(authority, l.ca.tokens, l.log.With("component", "ca"))
	return svc.Register, nil
}

// tokenPath is where the pod's CA token lives.
func (l *Lab) tokenPath(pod string) string { return filepath.Join(l.paths.PodDir(pod), tokenFile) }

// writePodToken issues the pod's CA token and writes it, mode 0600 and owned by the lab
// (root), so the agent can read it and the app (uid 65532) cannot.
func (l *Lab) writePodToken(p *model.Pod) error {
	tok, err := l.ca.tokens.Issue(ca.Caller{Pod: p.Name, Identity: ca.Identity{Namespace: p.Namespace, ServiceAccount: p.ServiceAccount}})
	if err != nil {
		return fmt.Errorf("issue CA token of pod %s: %w", p.Name, err)
	}
	f, err := os.OpenFile(l.tokenPath(p.Name), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
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
func workloadCert(c *agent.CertStatus) *web.WorkloadCert {
	if c == nil {
		return nil
	}
	return &web.WorkloadCert{SPIFFEID: c.SPIFFEID, Serial: c.Serial, NotBefore: c.NotBefore, NotAfter: c.NotAfter,
		RotateAt: c.RotateAt, Rotations: c.Rotations, Error: c.Error,
		Trust: &web.CertTrust{Issuer: c.Issuer, IssuerKeyID: c.IssuerKeyID, Intermediates: certRefs(c.Intermediates),
			TrustBundle: certRefs(c.TrustBundle), Paused: c.Paused, ErrorAt: c.ErrorAt}}
}

func certRefs(rs []agent.CertRef) []web.CARef {
	var out []web.CARef
	for _, r := range rs {
		out = append(out, web.CARef{Serial: r.Serial, Subject: r.Subject, KeyID: r.KeyID, NotAfter: r.NotAfter})
	}
	return out
}
