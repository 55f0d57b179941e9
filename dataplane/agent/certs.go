package agent

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// rotateFraction is when a certificate is renewed, as a fraction of its lifetime
// (Istio's SECRET_GRACE_PERIOD_RATIO is 0.5 with jitter; the issue asks for ~80%).
const rotateFraction = 0.8

// CertStatus is the workload certificate, as `meshlab describe pod` shows it.
type CertStatus struct {
	SPIFFEID  string    `json:"spiffeID"`
	Serial    string    `json:"serial,omitempty"`
	NotBefore time.Time `json:"notBefore,omitzero"`
	NotAfter  time.Time `json:"notAfter,omitzero"`
	RotateAt  time.Time `json:"rotateAt,omitzero"`
	Rotations int       `json:"rotations"`       // certificates issued after the first
	Error     string    `json:"error,omitempty"` // the last failed attempt, until one succeeds
}

// certManager keeps the pod's certificate current: it gets one at start and again at
// rotateFraction of its lifetime, and tells watchers. Safe for concurrent use.
type certManager struct {
	signer certSigner
	id     string
	ttl    time.Duration
	log    *slog.Logger
	now    func() time.Time

	mu       sync.Mutex
	cur      *workloadCert
	status   CertStatus
	changed  chan struct{} // closed and replaced on every new certificate
	issuance int
}

func newCertManager(s certSigner, id string, ttl time.Duration, log *slog.Logger) *certManager {
	return &certManager{signer: s, id: id, ttl: ttl, log: log, now: time.Now,
		status: CertStatus{SPIFFEID: id}, changed: make(chan struct{})}
}

// current returns the certificate (nil before the first) and a channel closed when it changes.
func (m *certManager) current() (*workloadCert, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur, m.changed
}

// snapshot returns the status for Status.Cert.
func (m *certManager) snapshot() CertStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.status
}

// Run gets certificates until ctx ends, retrying failures with backoff (250 ms doubling
// to 10 s, never past the current certificate's expiry). It returns nil when ctx ends.
func (m *certManager) Run(ctx context.Context) error {
	backoff := 250 * time.Millisecond
	for {
		c, err := m.fetch(ctx)
		var wait time.Duration
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			m.log.Warn("get workload certificate", "err", err)
			m.mu.Lock()
			m.status.Error = err.Error()
			m.mu.Unlock()
			wait = backoff
			backoff = min(backoff*2, 10*time.Second)
		} else {
			backoff = 250 * time.Millisecond
			wait = m.install(c).Sub(m.now())
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
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
	m.status = CertStatus{SPIFFEID: m.id, Serial: serial(c.leaf), NotBefore: c.leaf.NotBefore,
		NotAfter: c.leaf.NotAfter, RotateAt: rotateAt, Rotations: m.status.Rotations}
	close(m.changed)
	m.changed = make(chan struct{})
	m.log.Info("workload certificate issued", "spiffe_id", m.id, "serial", m.status.Serial,
		"not_after", c.leaf.NotAfter, "rotate_at", rotateAt)
	return rotateAt
}
