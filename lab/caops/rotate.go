package caops

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/ca"
	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
)

// Event kinds of the CA and the workload certificates.
const (
	EventCARootAdded      = "ca.root-added"       // rotation step 1: new root in the bundle, cross-signed by the old
	EventCABundlePushed   = "ca.bundle-pushed"    // every agent serves the bundle {old, new}
	EventCASigningSwitch  = "ca.signing-switched" // step 2: the new root signs, leaves carry the cross certificate
	EventCAOldRootDropped = "ca.old-root-dropped" // step 3: the bundle is {new}
	EventCARotated        = "ca.rotated"          // every agent has a certificate from the new root and trusts it alone
	EventCARotationFailed = "ca.rotation-failed"
	EventCAClock          = "ca.clock"     // the CA's clock offset changed
	EventCertRenewed      = "cert.renewed" // an agent renewed when the lab asked
	EventCertPaused       = "cert.paused"
	EventCertResumed      = "cert.resumed"
)

// Timeouts of one agent's answer.
const (
	// renewTimeout bounds one agent's renewal: the CSR and its proxy's ACK of the new
	// secrets (the agent answers once every SDS stream ACKed them).
	renewTimeout = 15 * time.Second
	pauseTimeout = 5 * time.Second
	readTimeout  = 2 * time.Second
)

// RotateRoot rotates the CA to a new root it makes, Istio-style and without breaking
// mTLS: see RotateRootWith. A lab whose root the user supplied refuses it.
func (c *CA) RotateRoot(ctx context.Context) error { return c.RotateRootWith(ctx, nil, nil) }

// RotateRootWith rotates the CA to the root certPEM/keyPEM (nil: a new one it makes;
// required when the user supplied the current one with --ca-cert/--ca-key):
// (1) the new root joins the trust bundle, cross-signed by the old, and every agent
// renews so it serves the bundle {old, new}; (2) the new root signs, leaves are sent with
// the cross certificate (peers trusting only the old root verify them), every agent
// renews; (3) the old root leaves the bundle, every agent renews again. Each step is an
// event; the new root is written to the run directory (key 0600). A rotation that failed
// half-way is finished by calling it again without a root. A request the CA refuses
// wraps api.ErrCARequest.
func (c *CA) RotateRootWith(ctx context.Context, certPEM, keyPEM []byte) error {
	if !c.mu.TryLock() {
		return fmt.Errorf("rotate root: %w: a rotation is already running", api.ErrCARequest)
	}
	defer c.mu.Unlock()
	err := c.rotateRoot(ctx, certPEM, keyPEM)
	if err != nil {
		c.deps.Publish(EventCARotationFailed, "", err.Error(), map[string]any{"phase": c.ca.State().Phase})
	}
	return err
}

func (c *CA) rotateRoot(ctx context.Context, certPEM, keyPEM []byte) error {
	authority := c.ca
	if authority.PluggedIn() {
		return fmt.Errorf("rotate root: %w: %w: change its intermediate and roots through that Secret", api.ErrCARequest, ca.ErrPlugged)
	}
	phase := authority.State().Phase
	if phase != ca.PhaseStable && certPEM != nil {
		return fmt.Errorf("rotate root: %w: a rotation is in phase %s; run rotate-root without a new root to finish it", api.ErrCARequest, phase)
	}
	old := authority.State().Signing
	if phase == ca.PhaseStable {
		next, err := c.newRoot(certPEM, keyPEM)
		if err != nil {
			return err
		}
		cross, err := authority.AddRoot(next)
		if err != nil {
			return fmt.Errorf("rotate root: %w", err)
		}
		ni := ca.Info(next.Cert)
		c.deps.Publish(EventCARootAdded, "", fmt.Sprintf("root %s (%s) added to the trust bundle, cross-signed by %s", ni.Serial, ni.Subject, old.Serial),
			map[string]any{"root": ni.Serial, "cross": ca.Info(cross).Serial, "old": old.Serial})
	}
	next := authority.Pending()
	if next == nil {
		return errors.New("rotate root: no new root pending")
	}
	ni := ca.Info(next.Cert)
	if authority.State().Phase == ca.PhaseTrustAdded {
		if err := c.renewAll(ctx, "bundle", func(s agentapi.CertStatus) error {
			if !slices.ContainsFunc(s.TrustBundle, func(r agentapi.CertRef) bool { return r.Serial == ni.Serial }) {
				return fmt.Errorf("new root %s is not in its trust bundle", ni.Serial)
			}
			return nil
		}); err != nil {
			return fmt.Errorf("rotate root: push trust bundle: %w", err)
		}
		c.deps.Publish(EventCABundlePushed, "", fmt.Sprintf("every agent trusts {%s, %s}", old.Serial, ni.Serial), map[string]any{"root": ni.Serial})
		if err := authority.SwitchSigning(); err != nil {
			return fmt.Errorf("rotate root: %w", err)
		}
	}
	if authority.State().Phase == ca.PhaseSigningSwitched {
		st := authority.State()
		c.deps.Publish(EventCASigningSwitch, "", fmt.Sprintf("root %s signs; leaves carry it cross-signed (%s)", ni.Serial, st.CrossSigned.Serial),
			map[string]any{"root": ni.Serial, "cross": st.CrossSigned.Serial})
		if err := c.renewAll(ctx, "reissue", func(s agentapi.CertStatus) error {
			if s.IssuerKeyID != ni.KeyID {
				return fmt.Errorf("its certificate is not from the new root %s (issuer %q)", ni.Serial, s.Issuer)
			}
			return nil
		}); err != nil {
			return fmt.Errorf("rotate root: reissue from the new root: %w", err)
		}
		if err := authority.DropOldRoots(); err != nil {
			return fmt.Errorf("rotate root: %w", err)
		}
		c.deps.Publish(EventCAOldRootDropped, "", fmt.Sprintf("trust bundle is {%s}", ni.Serial), map[string]any{"root": ni.Serial})
	}
	if err := c.renewAll(ctx, "final", func(s agentapi.CertStatus) error {
		if len(s.TrustBundle) != 1 || s.TrustBundle[0].Serial != ni.Serial || len(s.Intermediates) != 0 {
			return fmt.Errorf("it does not trust %s alone, or still sends the cross certificate", ni.Serial)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("rotate root: drop the old root: %w", err)
	}
	if err := c.persistRoot(next); err != nil {
		return fmt.Errorf("rotate root: %w", err)
	}
	c.deps.Publish(EventCARotated, "", fmt.Sprintf("root rotated to %s", ni.Serial), map[string]any{"root": ni.Serial})
	return nil
}

// newRoot parses the user's new root, or makes one; either way it is written to the run
// directory as ca-root-<n>-cert.pem and ca-root-<n>-key.pem (0600).
func (c *CA) newRoot(certPEM, keyPEM []byte) (*ca.Root, error) {
	if c.cfg.userRoot() && certPEM == nil {
		return nil, fmt.Errorf("rotate root: %w: this lab's root was supplied with --ca-cert/--ca-key; give the new one with --new-ca-cert and --new-ca-key", api.ErrCARequest)
	}
	c.gen++
	gen := c.gen + 1 // the lab's first root is 1
	var (
		next *ca.Root
		err  error
	)
	if certPEM != nil {
		if next, err = ca.ParseRoot(certPEM, keyPEM); err != nil {
			return nil, fmt.Errorf("rotate root: %w: %w", api.ErrCARequest, err)
		}
	} else if next, err = ca.NewNamedRoot(c.ca.TrustDomain(), fmt.Sprintf("meshlab root CA %d", gen), time.Now()); err != nil {
		return nil, fmt.Errorf("rotate root: %w", err)
	}
	dir := c.cfg.Dir
	if err := next.WriteFiles(filepath.Join(dir, fmt.Sprintf("ca-root-%d-cert.pem", gen)), filepath.Join(dir, fmt.Sprintf("ca-root-%d-key.pem", gen))); err != nil {
		return nil, fmt.Errorf("rotate root: %w", err)
	}
	return next, nil
}

// persistRoot makes r the lab's root on disk: its certificate, and its key when the lab
// keeps one (a lab made root, not a user-supplied one).
func (c *CA) persistRoot(r *ca.Root) error {
	certPath := filepath.Join(c.cfg.Dir, CertFile)
	if !c.cfg.userRoot() {
		return r.WriteFiles(certPath, filepath.Join(c.cfg.Dir, KeyFile))
	}
	if err := os.WriteFile(certPath, r.CertPEM(), 0o644); err != nil {
		return fmt.Errorf("write root certificate: %w", err)
	}
	return nil
}

// renewAll asks every agent to renew its certificate now, concurrently, and checks each
// answer; step names the rotation step in the events ("renew": a plain renewal, which
// leaves paused agents alone).
func (c *CA) renewAll(ctx context.Context, step string, check func(agentapi.CertStatus) error) error {
	pods := c.sidecarPods()
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Go(func() {
			st, err := c.renewPod(ctx, p.Key())
			if errors.Is(err, agentapi.ErrRenewalPaused) && step == "renew" {
				return
			}
			if err == nil && check != nil {
				err = check(st)
			}
			if err != nil {
				errs[i] = fmt.Errorf("pod %s: %w", p.Key(), err)
				return
			}
			c.deps.Publish(EventCertRenewed, p.Key(), fmt.Sprintf("certificate %s from %q, trusting %d root(s)", st.Serial, st.Issuer, len(st.TrustBundle)),
				map[string]any{"serial": st.Serial, "issuer": st.Issuer, "bundle": len(st.TrustBundle), "step": step})
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// renewPod has one agent renew now.
func (c *CA) renewPod(ctx context.Context, pod string) (agentapi.CertStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, renewTimeout)
	defer cancel()
	st, err := c.deps.AgentCert(ctx, pod, CertRenew)
	if err != nil {
		return st, fmt.Errorf("renew certificate: %w", err)
	}
	return st, nil
}

// RenewCerts has every agent whose renewal is not paused renew now.
func (c *CA) RenewCerts(ctx context.Context) error {
	return c.renewAll(ctx, "renew", nil)
}

// SetClockOffset shifts the CA's notion of now for the certificates it issues from now
// on (fault injection: -25h issues already expired 24 h certificates); 0 resets it.
func (c *CA) SetClockOffset(d time.Duration) {
	c.ca.SetClockOffset(d)
	msg := "CA clock reset"
	if d != 0 {
		msg = fmt.Sprintf("CA clock shifted by %s: new certificates are valid from now%+s", d, d)
	}
	c.deps.Publish(EventCAClock, "", msg, map[string]any{"offset": d.String()})
}

// PauseCertRenewal pauses (or resumes) a pod agent's certificate renewal, so that with a
// short --cert-ttl its certificate really expires. An unknown pod is api.ErrUnknownPod,
// one without an agent api.ErrNoSidecar.
func (c *CA) PauseCertRenewal(ctx context.Context, pod string, paused bool) error {
	p := c.deps.Model().Pod(pod)
	if p == nil {
		return fmt.Errorf("pod %q: %w", pod, api.ErrUnknownPod)
	}
	if !p.Sidecar.Inject {
		return fmt.Errorf("pause certificate renewal of pod %s: %w", pod, api.ErrNoSidecar)
	}
	ctx, cancel := context.WithTimeout(ctx, pauseTimeout)
	defer cancel()
	op, kind, msg := CertResume, EventCertResumed, "certificate renewal resumed"
	if paused {
		op, kind, msg = CertPause, EventCertPaused, "certificate renewal paused: the certificate will expire"
	}
	st, err := c.deps.AgentCert(ctx, pod, op)
	if err != nil {
		return fmt.Errorf("pause certificate renewal of pod %s: %w", pod, err)
	}
	c.deps.Publish(kind, pod, msg, map[string]any{"serial": st.Serial, "notAfter": st.NotAfter})
	return nil
}

// Status is the CA's state and every agent's certificate, read concurrently.
func (c *CA) Status(ctx context.Context) api.CAStatus {
	st := c.ca.State()
	out := api.CAStatus{TrustDomain: st.TrustDomain, Phase: st.Phase, UserSupplied: c.cfg.userRoot(),
		ClockOffset: st.ClockOffset.String(), Signing: caRef(st.Signing), Pods: []api.CAPodCert{}}
	byKey := map[string]string{}
	for _, r := range st.Bundle {
		out.Bundle = append(out.Bundle, caRef(r))
		byKey[r.KeyID] = r.Serial
	}
	if st.CrossSigned != nil {
		r := caRef(*st.CrossSigned)
		out.CrossSigned = &r
	}
	pods := c.sidecarPods()
	certs := make([]api.CAPodCert, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Go(func() { certs[i] = c.podCert(ctx, p.Key(), byKey) })
	}
	wg.Wait()
	out.Pods = append(out.Pods, certs...)
	return out
}

// podCert reads one agent's certificate for Status.
func (c *CA) podCert(ctx context.Context, pod string, rootByKey map[string]string) api.CAPodCert {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	out := api.CAPodCert{Pod: pod, IssuingRoot: "unknown", Bundle: []string{}}
	st, err := c.deps.AgentCert(ctx, pod, CertRead)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	out.Serial, out.NotAfter, out.Issuer, out.Paused, out.Error = st.Serial, st.NotAfter, st.Issuer, st.Paused, st.Error
	if s, ok := rootByKey[st.IssuerKeyID]; ok {
		out.IssuingRoot = s
	}
	for _, r := range st.TrustBundle {
		out.Bundle = append(out.Bundle, r.Serial)
	}
	return out
}

func caRef(r ca.RootInfo) api.CARef {
	return api.CARef{Serial: r.Serial, Subject: r.Subject, KeyID: r.KeyID, NotAfter: r.NotAfter, Signing: r.Signing}
}
