// Package caops is the lab's CA operations: it makes (or loads) the lab's root and
// serves the CA, rotates the root Istio-style without breaking mTLS (new root in the
// bundle, then signing, then the old root out, every agent renewing at each step),
// shifts the CA's clock, and has agents renew, pause or resume their certificate
// renewal, publishing an event at each step. It reads the lab only through Deps, so it
// sits below package lab and never imports it.
package caops

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/meshlab/meshlab/controlplane/ca"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
)

// Deps is what the CA operations need of the lab. Its methods are called concurrently
// (one goroutine per pod during a renewal).
type Deps interface {
	// Model is the lab's current model; callers do not modify it.
	Model() *model.Model
	// AgentCert has the pod's agent answer about its workload certificate: op CertRead
	// reads it, the others ask for it to be renewed, or its renewal paused or resumed.
	// An agent whose renewal is paused refuses CertRenew with agentapi.ErrRenewalPaused
	// (errors.Is).
	AgentCert(ctx context.Context, pod string, op CertOp) (agentapi.CertStatus, error)
	// Publish puts an event on the lab's bus.
	Publish(kind, pod, msg string, fields map[string]any)
}

// CertOp is what AgentCert asks an agent.
type CertOp string

// The agent's certificate operations: the path under its /certs.
const (
	CertRead   CertOp = ""
	CertRenew  CertOp = "renew"
	CertPause  CertOp = "pause"
	CertResume CertOp = "resume"
)

// File names of the CA in the lab's run directory.
const (
	CertFile = "ca-cert.pem" // the root certificate (0644)
	KeyFile  = "ca-key.pem"  // its key (0600), only when the lab made the root
)

// Config is the lab's CA as `meshlab up` was asked for it.
type Config struct {
	Dir string // required: the lab's run directory, where the roots are written
	// UserCertFile and UserKeyFile are a user-supplied root (PEM), both or neither;
	// optional, "" makes a new root per lab.
	UserCertFile, UserKeyFile string
	TTL                       time.Duration // optional: workload certificate lifetime, 0 = 24h, at least ca.MinTTL
}

// Check reports whether the configuration is usable (the user's root, if any, loads),
// before anything is created.
func (c Config) Check() error {
	if (c.UserCertFile == "") != (c.UserKeyFile == "") {
		return fmt.Errorf("--ca-cert and --ca-key go together")
	}
	if c.TTL != 0 && c.TTL < ca.MinTTL {
		return fmt.Errorf("cert ttl %s is below the minimum %s", c.TTL, ca.MinTTL)
	}
	if c.UserCertFile == "" {
		return nil
	}
	if _, err := ca.LoadRoot(c.UserCertFile, c.UserKeyFile); err != nil {
		return fmt.Errorf("load --ca-cert/--ca-key: %w", err)
	}
	return nil
}

// userRoot reports whether the user supplied the lab's root.
func (c Config) userRoot() bool { return c.UserCertFile != "" }

// CA is a running lab's CA, the tokens it accepts and its rotations. Safe for
// concurrent use; one rotation runs at a time.
type CA struct {
	cfg    Config
	ca     *ca.CA
	tokens *ca.Tokens
	deps   Deps

	mu      sync.Mutex        // held by a rotation or a plug-in
	gen     int               // roots made by rotations
	plugged [sha256.Size]byte // the cacerts files the CA signs with (PlugIn), zero before
}

// Start makes the lab's CA: the user's root, or a new one whose key is written 0600 in
// the run directory; the root certificate is written there either way.
func Start(cfg Config, d Deps) (*CA, error) {
	var (
		root *ca.Root
		err  error
	)
	certPath := filepath.Join(cfg.Dir, CertFile)
	if cfg.userRoot() {
		if root, err = ca.LoadRoot(cfg.UserCertFile, cfg.UserKeyFile); err != nil {
			return nil, fmt.Errorf("start CA: %w", err)
		}
		if err := os.WriteFile(certPath, root.CertPEM(), 0o644); err != nil {
			return nil, fmt.Errorf("start CA: write root certificate: %w", err)
		}
	} else {
		if root, err = ca.NewRoot(ca.DefaultTrustDomain, time.Now()); err != nil {
			return nil, fmt.Errorf("start CA: %w", err)
		}
		if err := root.WriteFiles(certPath, filepath.Join(cfg.Dir, KeyFile)); err != nil {
			return nil, fmt.Errorf("start CA: %w", err)
		}
	}
	authority, err := ca.New(ca.Options{Root: root, TTL: cfg.TTL})
	if err != nil {
		return nil, fmt.Errorf("start CA: %w", err)
	}
	return New(cfg, authority, d), nil
}

// New is the lab's CA around an authority that exists already (Start makes one), with
// no tokens issued yet.
func New(cfg Config, authority *ca.CA, d Deps) *CA {
	return &CA{cfg: cfg, ca: authority, tokens: ca.NewTokens(), deps: d}
}

// Authority is the CA that signs.
func (c *CA) Authority() *ca.CA { return c.ca }

// Tokens are the pod tokens the CA (and the discovery server) accepts.
func (c *CA) Tokens() *ca.Tokens { return c.tokens }

// Register returns the function that serves the CA (Istio's IstioCertificateService)
// on a gRPC server; log is the CA's logger.
func (c *CA) Register(log *slog.Logger) func(*grpc.Server) {
	return ca.NewService(c.ca, c.tokens, log).Register
}

// sidecarPods returns the pods of the current model that have an agent.
func (c *CA) sidecarPods() []*model.Pod {
	var out []*model.Pod
	for _, p := range c.deps.Model().Pods {
		if p.Sidecar.Inject {
			out = append(out, p)
		}
	}
	return out
}
