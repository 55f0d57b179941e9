package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshlab/meshlab/controlplane/ca"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/dataplane/agent"
	"github.com/meshlab/meshlab/web"
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

// renewTimeout bounds one agent's renewal: the CSR and its proxy's ACK of the new
// secrets (the agent answers once every SDS stream ACKed them).
const renewTimeout = 15 * time.Second

var _ web.CABackend = (*Lab)(nil)

// caRotation serializes rotations and numbers the roots they make.
type caRotation struct {
	mu  sync.Mutex
	gen int
}

// RotateRoot rotates the lab CA to a new root it makes, Istio-style and without breaking
// mTLS: see RotateRootWith. A lab whose root the user supplied refuses it.
func (l *Lab) RotateRoot(ctx context.Context) error { return l.RotateRootWith(ctx, nil, nil) }

// RotateRootWith rotates the lab CA to the root certPEM/keyPEM (nil: a new one the lab
// makes; required when the user supplied the current one with --ca-cert/--ca-key):
// (1) the new root joins the trust bundle, cross-signed by the old, and every agent
// renews so it serves the bundle {old, new}; (2) the new root signs, leaves are sent with
// the cross certificate (peers trusting only the old root verify them), every agent
// renews; (3) the old root leaves the bundle, every agent renews again. Each step is an
// event; the new root is written to the run directory (key 0600). A rotation that failed
// half-way is finished by calling it again without a root.
func (l *Lab) RotateRootWith(ctx context.Context, certPEM, keyPEM []byte) error {
	if l.ca == nil {
		return fmt.Errorf("rotate root: %w: the lab has no CA", web.ErrCARequest)
	}
	if !l.ca.rot.mu.TryLock() {
		return fmt.Errorf("rotate root: %w: a rotation is already running", web.ErrCARequest)
	}
	defer l.ca.rot.mu.Unlock()
	err := l.rotateRoot(ctx, certPEM, keyPEM)
	if err != nil {
		l.publish(EventCARotationFailed, "", err.Error(), map[string]any{"phase": l.ca.ca.State().Phase})
	}
	return err
}

func (l *Lab) rotateRoot(ctx context.Context, certPEM, keyPEM []byte) error {
	authority := l.ca.ca
	phase := authority.State().Phase
	if phase != ca.PhaseStable && certPEM != nil {
		return fmt.Errorf("rotate root: %w: a rotation is in phase %s; run rotate-root without a new root to finish it", web.ErrCARequest, phase)
	}
	old := authority.State().Signing
	if phase == ca.PhaseStable {
		next, err := l.newRoot(certPEM, keyPEM)
		if err != nil {
			return err
		}
		cross, err := authority.AddRoot(next)
		if err != nil {
			return fmt.Errorf("rotate root: %w", err)
		}
		ni := ca.Info(next.Cert)
		l.publish(EventCARootAdded, "", fmt.Sprintf("root %s (%s) added to the trust bundle, cross-signed by %s", ni.Serial, ni.Subject, old.Serial),
			map[string]any{"root": ni.Serial, "cross": ca.Info(cross).Serial, "old": old.Serial})
	}
	next := authority.Pending()
	if next == nil {
		return errors.New("rotate root: no new root pending")
	}
	ni := ca.Info(next.Cert)
	if authority.State().Phase == ca.PhaseTrustAdded {
		if err := l.renewAll(ctx, "bundle", func(c agent.CertStatus) error {
			if !slices.ContainsFunc(c.TrustBundle, func(r agent.CertRef) bool { return r.Serial == ni.Serial }) {
				return fmt.Errorf("new root %s is not in its trust bundle", ni.Serial)
			}
			return nil
		}); err != nil {
			return fmt.Errorf("rotate root: push trust bundle: %w", err)
		}
		l.publish(EventCABundlePushed, "", fmt.Sprintf("every agent trusts {%s, %s}", old.Serial, ni.Serial), map[string]any{"root": ni.Serial})
		if err := authority.SwitchSigning(); err != nil {
			return fmt.Errorf("rotate root: %w", err)
		}
	}
	if authority.State().Phase == ca.PhaseSigningSwitched {
		st := authority.State()
		l.publish(EventCASigningSwitch, "", fmt.Sprintf("root %s signs; leaves carry it cross-signed (%s)", ni.Serial, st.CrossSigned.Serial),
			map[string]any{"root": ni.Serial, "cross": st.CrossSigned.Serial})
		if err := l.renewAll(ctx, "reissue", func(c agent.CertStatus) error {
			if c.IssuerKeyID != ni.KeyID {
				return fmt.Errorf("its certificate is not from the new root %s (issuer %q)", ni.Serial, c.Issuer)
			}
			return nil
		}); err != nil {
			return fmt.Errorf("rotate root: reissue from the new root: %w", err)
		}
		if err := authority.DropOldRoots(); err != nil {
			return fmt.Errorf("rotate root: %w", err)
		}
		l.publish(EventCAOldRootDropped, "", fmt.Sprintf("trust bundle is {%s}", ni.Serial), map[string]any{"root": ni.Serial})
	}
	if err := l.renewAll(ctx, "final", func(c agent.CertStatus) error {
		if len(c.TrustBundle) != 1 || c.TrustBundle[0].Serial != ni.Serial || len(c.Intermediates) != 0 {
			return fmt.Errorf("it does not trust %s alone, or still sends the cross certificate", ni.Serial)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("rotate root: drop the old root: %w", err)
	}
	if err := l.persistRoot(next, filepath.Join(l.paths.Dir, caCertFile), filepath.Join(l.paths.Dir, caKeyFile)); err != nil {
		return fmt.Errorf("rotate root: %w", err)
	}
	l.publish(EventCARotated, "", fmt.Sprintf("root rotated to %s", ni.Serial), map[string]any{"root": ni.Serial})
	return nil
}

// newRoot parses the user's new root, or makes one; either way it is written to the run
// directory as ca-root-<n>-cert.pem and ca-root-<n>-key.pem (0600).
func (l *Lab) newRoot(certPEM, keyPEM []byte) (*ca.Root, error) {
	if l.opts.CACertFile != "" && certPEM == nil {
		return nil, fmt.Errorf("rotate root: %w: this lab's root was supplied with --ca-cert/--ca-key; give the new one with --new-ca-cert and --new-ca-key", web.ErrCARequest)
	}
	l.ca.rot.gen++
	gen := l.ca.rot.gen + 1 // the lab's first root is 1
	var (
		next *ca.Root
		err  error
	)
	if certPEM != nil {
		if next, err = ca.ParseRoot(certPEM, keyPEM); err != nil {
			return nil, fmt.Errorf("rotate root: %w: %w", web.ErrCARequest, err)
		}
	} else if next, err = ca.NewNamedRoot(l.ca.ca.TrustDomain(), fmt.Sprintf("meshlab root CA %d", gen), time.Now()); err != nil {
		return nil, fmt.Errorf("rotate root: %w", err)
	}
	dir := l.paths.Dir
	if err := next.WriteFiles(filepath.Join(dir, fmt.Sprintf("ca-root-%d-cert.pem", gen)), filepath.Join(dir, fmt.Sprintf("ca-root-%d-key.pem", gen))); err != nil {
		return nil, fmt.Errorf("rotate root: %w", err)
	}
	return next, nil
}

// persistRoot makes r the lab's root on disk: its certificate, and its key when the lab
// keeps one (a lab made root, not a user-supplied one).
func (l *Lab) persistRoot(r *ca.Root, certPath, keyPath string) error {
	if l.opts.CACertFile == "" {
		return r.WriteFiles(certPath, keyPath)
	}
	if err := os.WriteFile(certPath, r.CertPEM(), 0o644); err != nil {
		return fmt.Errorf("write root certificate: %w", err)
	}
	return nil
}

// sidecarPods returns the pods of the current model that have an agent.
func (l *Lab) sidecarPods() []*model.Pod {
	l.mu.Lock()
	m := l.model
	l.mu.Unlock()
	var out []*model.Pod
	for _, p := range m.Pods {
		if p.Sidecar.Inject {
			out = append(out, p)
		}
	}
	return out
}

// renewAll asks every agent to renew its certificate now, concurrently, and checks each
// answer; step names the rotation step in the events.
func (l *Lab) renewAll(ctx context.Context, step string, check func(agent.CertStatus) error) error {
	pods := l.sidecarPods()
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Go(func() {
			st, err := l.renewPod(ctx, p.Name)
			if errors.Is(err, errAgentPaused) && step == "renew" {
				return // a plain renewal leaves paused agents alone
			}
			if err == nil && check != nil {
				err = check(st)
			}
			if err != nil {
				errs[i] = fmt.Errorf("pod %s: %w", p.Name, err)
				return
			}
			l.publish(EventCertRenewed, p.Name, fmt.Sprintf("certificate %s from %q, trusting %d root(s)", st.Serial, st.Issuer, len(st.TrustBundle)),
				map[string]any{"serial": st.Serial, "issuer": st.Issuer, "bundle": len(st.TrustBundle), "step": step})
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// renewPod has one agent renew now.
func (l *Lab) renewPod(ctx context.Context, pod string) (agent.CertStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, renewTimeout)
	defer cancel()
	c := newAgentClient(l.paths.AgentSocket(pod))
	defer c.close()
	var st agent.CertStatus
	if err := c.post(ctx, "/certs/renew", &st); err != nil {
		if strings.Contains(err.Error(), agent.ErrRenewalPaused.Error()) {
			return st, fmt.Errorf("renew certificate: %w", errAgentPaused)
		}
		return st, fmt.Errorf("renew certificate: %w", err)
	}
	return st, nil
}

// RenewCerts implements web.CABackend: every agent whose renewal is not paused renews now.
func (l *Lab) RenewCerts(ctx context.Context) error {
	if l.ca == nil {
		return fmt.Errorf("renew certificates: %w: the lab has no CA", web.ErrCARequest)
	}
	return l.renewAll(ctx, "renew", func(agent.CertStatus) error { return nil })
}

// errAgentPaused is an agent's 409 answer to a renewal: its ErrRenewalPaused.
var errAgentPaused = agent.ErrRenewalPaused

// SetCAClockOffset shifts the CA's notion of now for the certificates it issues from now
// on (fault injection: -25h issues already expired 24 h certificates); 0 resets it.
func (l *Lab) SetCAClockOffset(d time.Duration) {
	if l.ca == nil {
		return
	}
	l.ca.ca.SetClockOffset(d)
	msg := "CA clock reset"
	if d != 0 {
		msg = fmt.Sprintf("CA clock shifted by %s: new certificates are valid from now%+s", d, d)
	}
	l.publish(EventCAClock, "", msg, map[string]any{"offset": d.String()})
}

// PauseCertRenewal pauses (or resumes) a pod agent's certificate renewal, so that with a
// short --cert-ttl its certificate really expires.
func (l *Lab) PauseCertRenewal(pod string, paused bool) error {
	p, err := l.podNamed(pod)
	if err != nil {
		return err
	}
	if !p.Sidecar.Inject {
		return fmt.Errorf("pause certificate renewal of pod %s: %w", pod, web.ErrNoSidecar)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := newAgentClient(l.paths.AgentSocket(pod))
	defer c.close()
	path, kind, msg := "/certs/resume", EventCertResumed, "certificate renewal resumed"
	if paused {
		path, kind, msg = "/certs/pause", EventCertPaused, "certificate renewal paused: the certificate will expire"
	}
	var st agent.CertStatus
	if err := c.post(ctx, path, &st); err != nil {
		return fmt.Errorf("pause certificate renewal of pod %s: %w", pod, err)
	}
	l.publish(kind, pod, msg, map[string]any{"serial": st.Serial, "notAfter": st.NotAfter})
	return nil
}

// CAStatus implements web.CABackend.
func (l *Lab) CAStatus(ctx context.Context) (web.CAStatus, error) {
	if l.ca == nil {
		return web.CAStatus{}, fmt.Errorf("ca status: %w: the lab has no CA", web.ErrCARequest)
	}
	st := l.ca.ca.State()
	out := web.CAStatus{TrustDomain: st.TrustDomain, Phase: st.Phase, UserSupplied: l.opts.CACertFile != "",
		ClockOffset: st.ClockOffset.String(), Signing: caRef(st.Signing), Pods: []web.CAPodCert{}}
	byKey := map[string]string{}
	for _, r := range st.Bundle {
		out.Bundle = append(out.Bundle, caRef(r))
		byKey[r.KeyID] = r.Serial
	}
	if st.CrossSigned != nil {
		r := caRef(*st.CrossSigned)
		out.CrossSigned = &r
	}
	pods := l.sidecarPods()
	certs := make([]web.CAPodCert, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Go(func() { certs[i] = l.podCert(ctx, p.Name, byKey) })
	}
	wg.Wait()
	out.Pods = append(out.Pods, certs...)
	return out, nil
}

// podCert reads one agent's certificate for CAStatus.
func (l *Lab) podCert(ctx context.Context, pod string, rootByKey map[string]string) web.CAPodCert {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c := newAgentClient(l.paths.AgentSocket(pod))
	defer c.close()
	out := web.CAPodCert{Pod: pod, IssuingRoot: "unknown", Bundle: []string{}}
	resp, err := c.get(ctx, "/certs")
	if err != nil {
		out.Error = err.Error()
		return out
	}
	defer resp.Body.Close()
	var st agent.CertStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
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

func caRef(r ca.RootInfo) web.CARef {
	return web.CARef{Serial: r.Serial, Subject: r.Subject, KeyID: r.KeyID, NotAfter: r.NotAfter, Signing: r.Signing}
}
