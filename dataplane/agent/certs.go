package agent

import (
	"context"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
)

// rotateFraction is when a certificate is renewed, as a fraction of its lifetime
// (Istio's SECRET_GRACE_PERIOD_RATIO is 0.5 with jitter; the issue asks for ~80%).
const rotateFraction = 0.8

func certRefs(cs []*x509.Certificate) []agentapi.CertRef {
	var out []agentapi.CertRef
	for _, c := range cs {
		out = append(out, agentapi.CertRef{Serial: serial(c), Subject: c.Subject.CommonName, KeyID: hex.EncodeToString(c.SubjectKeyId), NotAfter: c.NotAfter})
	}
	return out
}

// certManager keeps the pod's certificate current: it gets one at start and again at
// rotateFraction of its lifetime (or at once when asked to renew), and tells watchers.
// Renewal can be paused, so that a certificate really expires. Safe for concurrent use.
type certManager struct {
	signer certSigner
	id     string
	ttl    time.Duration
	log    *slog.Logger
	now    func() time.Time
	kick   chan struct{} // wakes Run to look at paused and next again
	acks   *sdsAcks      // what the proxies' SDS streams ACKed

	fetchMu sync.Mutex // one CSR at a time

	mu       sync.Mutex
	cur      *workloadCert
	status   agentapi.CertStatus
	changed  chan struct{} // closed and replaced on every new certificate
	issuance int
	next     time.Time // when Run next asks for a certificate (zero: at once)
	backoff  time.Duration
}

func newCertManager(s certSigner, id string, ttl time.Duration, log *slog.Logger) *certManager {
	return &certManager{signer: s, id: id, ttl: ttl, log: log, now: time.Now, kick: make(chan struct{}, 1), acks: newSDSAcks(),
		status: agentapi.CertStatus{SPIFFEID: id}, changed: make(chan struct{})}
}

// current returns the certificate (nil before the first) and a channel closed when it changes.
func (m *certManager) current() (*workloadCert, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur, m.changed
}

// snapshot returns the status for Status.Cert.
func (m *certManager) snapshot() agentapi.CertStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.status
}

// Run gets certificates until ctx ends, retrying failures with backoff (250 ms doubling
// to 10 s). While renewal is paused it asks for none. It returns nil when ctx ends.
func (m *certManager) Run(ctx context.Context) error {
	for {
		m.mu.Lock()
		paused, next := m.status.Paused, m.next
		m.mu.Unlock()
		if !paused && !m.now().Before(next) {
			m.attemptIfDue(ctx)
			if ctx.Err() != nil {
				return nil
			}
			continue
		}
		var (
			fire <-chan time.Time
			t    *time.Timer
		)
		if !paused {
			t = time.NewTimer(next.Sub(m.now()))
			fire = t.C
		}
		select {
		case <-ctx.Done():
		case <-fire:
		case <-m.kick:
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// attemptIfDue is attempt for Run: it checks again, holding fetchMu, that a certificate
// is still due, since a renewal asked over agent.sock may have installed one meanwhile
// (else the older request would install its certificate over the newer one).
func (m *certManager) attemptIfDue(ctx context.Context) {
	m.fetchMu.Lock()
	defer m.fetchMu.Unlock()
	m.mu.Lock()
	due := !m.status.Paused && !m.now().Before(m.next)
	m.mu.Unlock()
	if due {
		_, _ = m.attemptLocked(ctx)
	}
}

// attempt asks the CA for a certificate once and installs it, or records the error
// and schedules a retry.
func (m *certManager) attempt(ctx context.Context) (agentapi.CertStatus, error) {
	m.fetchMu.Lock()
	defer m.fetchMu.Unlock()
	return m.attemptLocked(ctx)
}

// attemptLocked is attempt with fetchMu held.
func (m *certManager) attemptLocked(ctx context.Context) (agentapi.CertStatus, error) {
	c, err := m.fetch(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return m.snapshot(), err
		}
		m.log.Warn("get workload certificate", "err", err)
		m.mu.Lock()
		defer m.mu.Unlock()
		m.backoff = min(max(m.backoff*2, 250*time.Millisecond), 10*time.Second)
		m.status.Error, m.status.ErrorAt = err.Error(), m.now()
		m.next = m.now().Add(m.backoff)
		return m.status, err
	}
	m.install(c)
	if now := m.now(); now.After(c.leaf.NotAfter) || now.Before(c.leaf.NotBefore) {
		// Served anyway (the CA's clock is shifted on purpose, and peers must see it), but
		// asked again with backoff rather than every minRotateWait.
		m.mu.Lock()
		defer m.mu.Unlock()
		m.backoff = min(max(m.backoff*2, 250*time.Millisecond), 10*time.Second)
		m.next = now.Add(m.backoff)
		m.status.RotateAt = m.next
		m.status.Error = fmt.Sprintf("the CA issued a certificate valid only from %s to %s (is its clock shifted?)",
			c.leaf.NotBefore.UTC().Format(time.RFC3339), c.leaf.NotAfter.UTC().Format(time.RFC3339))
		m.status.ErrorAt = now
		return m.status, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.backoff = 0
	return m.status, nil
}

// renew gets a new certificate now (and with it the CA's current trust bundle), waits
// until every proxy's SDS stream ACKed it, and returns the new status; ErrRenewalPaused
// while paused.
func (m *certManager) renew(ctx context.Context) (agentapi.CertStatus, error) {
	if m.snapshot().Paused {
		return m.snapshot(), agentapi.ErrRenewalPaused
	}
	st, err := m.attempt(ctx)
	m.wake()
	if err != nil {
		return st, err
	}
	if _, err := m.acks.wait(ctx, func() string { return m.snapshot().Serial }); err != nil {
		return st, err
	}
	return st, nil
}

// setPaused pauses or resumes renewal. Resuming renews at once if the certificate is due.
func (m *certManager) setPaused(paused bool) agentapi.CertStatus {
	m.mu.Lock()
	m.status.Paused = paused
	st := m.status
	m.mu.Unlock()
	m.log.Info("certificate renewal", "paused", paused)
	m.wake()
	return st
}

func (m *certManager) wake() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

func (m *certManager) fetch(ctx context.Context) (*workloadCert, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return issue(ctx, m.signer, m.id, m.ttl)
}

// minRotateWait keeps a certificate at least this long, so a very short TTL cannot
// turn rotation into a busy loop.
const minRotateWait = 100 * time.Millisecond

// install makes c current, wakes watchers and returns when to rotate it: at
// rotateFraction of the time left from now to NotAfter. Counting from now rather than
// NotBefore matters for TTLs of seconds, because X.509 times have whole seconds only.
func (m *certManager) install(c *workloadCert) time.Time {
	now := m.now()
	left := c.leaf.NotAfter.Sub(now)
	rotateAt := now.Add(max(time.Duration(float64(left)*rotateFraction), minRotateWait))
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cur = c
	if m.issuance > 0 {
		m.status.Rotations++
	}
	m.issuance++
	m.next = rotateAt
	// The certificate's own identity: the CA names it in the mesh's trust domain of now,
	// which after a trust domain migration is not the one this agent asked for.
	id := m.id
	if len(c.leaf.URIs) == 1 {
		id = c.leaf.URIs[0].String()
	}
	m.status = agentapi.CertStatus{SPIFFEID: id, Serial: serial(c.leaf), NotBefore: c.leaf.NotBefore,
		NotAfter: c.leaf.NotAfter, RotateAt: rotateAt, Rotations: m.status.Rotations, Paused: m.status.Paused,
		IssuerKeyID: hex.EncodeToString(c.leaf.AuthorityKeyId), Issuer: c.leaf.Issuer.CommonName,
		Intermediates: certRefs(c.inter), TrustBundle: certRefs(c.bundle)}
	close(m.changed)
	m.changed = make(chan struct{})
	m.log.Info("workload certificate issued", "spiffe_id", id, "serial", m.status.Serial,
		"not_after", c.leaf.NotAfter, "rotate_at", rotateAt, "issuer", m.status.Issuer, "trust_bundle", len(c.bundle))
	return rotateAt
}
