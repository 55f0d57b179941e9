package caops

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/ca"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
	"github.com/meshlab/meshlab/internal/testutil"
)

// fakeLab is Deps over fake agents that get their certificates from the real CA, as an
// agent does (a CSR for the pod's SPIFFE ID, the chain split into leaf, intermediates
// and self-signed roots), and a recording bus.
type fakeLab struct {
	t     *testing.T
	model *model.Model
	ca    *ca.CA // set once the CA exists

	mu     sync.Mutex
	certs  map[string]agentapi.CertStatus
	paused map[string]bool
	down   map[string]bool // agents that do not answer
	events []api.Event
}

var _ Deps = (*fakeLab)(nil)

func newFakeLab(t *testing.T) *fakeLab {
	t.Helper()
	pod := func(name, ip string, inject bool) *model.Pod {
		return &model.Pod{Name: name, Namespace: "default", ServiceAccount: name, IP: netip.MustParseAddr(ip), Sidecar: model.SidecarSpec{Inject: inject}}
	}
	m := model.New(nil, []*model.Pod{pod("frontend", "10.244.0.2", true), pod("backend", "10.244.0.3", true), pod("plain", "10.244.0.4", false)})
	return &fakeLab{t: t, model: m, certs: map[string]agentapi.CertStatus{}, paused: map[string]bool{}, down: map[string]bool{}}
}

func (f *fakeLab) Model() *model.Model { return f.model }

func (f *fakeLab) Publish(kind, pod, msg string, fields map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, api.Event{Kind: kind, Pod: pod, Message: msg, Fields: fields})
}

func (f *fakeLab) AgentCert(_ context.Context, pod string, op CertOp) (agentapi.CertStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down[pod] {
		return agentapi.CertStatus{}, fmt.Errorf("GET /certs: dial unix agent.sock: connection refused")
	}
	switch op {
	case CertRead:
	case CertPause, CertResume:
		f.paused[pod] = op == CertPause
	case CertRenew:
		if f.paused[pod] {
			return agentapi.CertStatus{}, agentapi.ErrRenewalPaused
		}
		st, err := f.issue(f.model.Pod(pod))
		if err != nil {
			return st, err
		}
		f.certs[pod] = st
	default:
		f.t.Errorf("AgentCert(%s, %q): unknown op", pod, op)
	}
	st := f.certs[pod]
	st.Paused = f.paused[pod]
	return st, nil
}

// issue gets pod a certificate from the CA as its agent would.
func (f *fakeLab) issue(p *model.Pod) (agentapi.CertStatus, error) {
	id := ca.Identity{Namespace: p.Namespace, ServiceAccount: p.ServiceAccount}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return agentapi.CertStatus{}, err
	}
	u, err := url.Parse(id.SPIFFEID(f.ca.TrustDomain()))
	if err != nil {
		return agentapi.CertStatus{}, err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{URIs: []*url.URL{u}}, key)
	if err != nil {
		return agentapi.CertStatus{}, err
	}
	chain, err := f.ca.Sign(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), id, 0)
	if err != nil {
		return agentapi.CertStatus{}, err
	}
	var certs []*x509.Certificate
	for _, c := range chain {
		b, _ := pem.Decode([]byte(c))
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return agentapi.CertStatus{}, err
		}
		certs = append(certs, cert)
	}
	leaf := certs[0]
	st := agentapi.CertStatus{SPIFFEID: u.String(), Serial: ca.Info(leaf).Serial, NotBefore: leaf.NotBefore, NotAfter: leaf.NotAfter,
		IssuerKeyID: hex.EncodeToString(leaf.AuthorityKeyId), Issuer: leaf.Issuer.CommonName}
	for _, c := range certs[1:] {
		i := ca.Info(c)
		ref := agentapi.CertRef{Serial: i.Serial, Subject: i.Subject, KeyID: i.KeyID, NotAfter: i.NotAfter}
		if c.CheckSignatureFrom(c) == nil {
			st.TrustBundle = append(st.TrustBundle, ref)
		} else {
			st.Intermediates = append(st.Intermediates, ref)
		}
	}
	return st, nil
}

// kinds lists the events' kinds, "kind pod" for a pod's.
func (f *fakeLab) kinds() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, e := range f.events {
		k := e.Kind
		if e.Pod != "" {
			k += " " + e.Pod
		}
		out = append(out, k)
	}
	return out
}

// newCA is a lab CA over f with a root of its own in a temporary run directory (the
// user's root when userRoot), every sidecar pod holding a certificate from it.
func newCA(t *testing.T, f *fakeLab, userRoot bool) *CA {
	t.Helper()
	cfg := Config{Dir: t.TempDir()}
	if userRoot {
		root, err := ca.NewNamedRoot(ca.DefaultTrustDomain, "user root 1", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		cfg.UserCertFile, cfg.UserKeyFile = filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
		if err := root.WriteFiles(cfg.UserCertFile, cfg.UserKeyFile); err != nil {
			t.Fatal(err)
		}
	}
	c, err := Start(cfg, f)
	if err != nil {
		t.Fatal(err)
	}
	f.ca = c.Authority()
	for _, p := range []string{"frontend", "backend"} {
		if _, err := f.AgentCert(context.Background(), p, CertRenew); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// renewed is the cert.renewed events of a renewal of every sidecar pod, in sorted order.
var renewed = []string{EventCertRenewed + " backend", EventCertRenewed + " frontend"}

// sortedRuns sorts each run of cert.renewed events (they come concurrently) so the
// sequence can be compared.
func sortedRuns(ks []string) []string {
	out := slices.Clone(ks)
	for i := 0; i < len(out); {
		j := i
		for j < len(out) && len(out[j]) > len(EventCertRenewed) && out[j][:len(EventCertRenewed)] == EventCertRenewed {
			j++
		}
		slices.Sort(out[i:j])
		i = max(j, i+1)
	}
	return out
}

func TestRotateRootStepsAndEvents(t *testing.T) {
	t.Parallel()
	f := newFakeLab(t)
	c := newCA(t, f, false)
	oldRoot := c.Authority().State().Signing
	if err := c.RotateRoot(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := c.Authority().State()
	if st.Phase != ca.PhaseStable || st.Signing.Serial == oldRoot.Serial || len(st.Bundle) != 1 {
		t.Fatalf("state after rotation %+v", st)
	}
	want := slices.Concat([]string{EventCARootAdded}, renewed, []string{EventCABundlePushed, EventCASigningSwitch},
		renewed, []string{EventCAOldRootDropped}, renewed, []string{EventCARotated})
	if got := sortedRuns(f.kinds()); !slices.Equal(got, want) {
		t.Fatalf("events\n%v\nwant\n%v", got, want)
	}
	for _, p := range []string{"frontend", "backend"} {
		got := f.certs[p]
		if got.IssuerKeyID != st.Signing.KeyID || len(got.TrustBundle) != 1 || got.TrustBundle[0].Serial != st.Signing.Serial || len(got.Intermediates) != 0 {
			t.Errorf("pod %s after rotation: %+v, want a leaf of %s trusting it alone", p, got, st.Signing.Serial)
		}
	}
	if _, ok := f.certs["plain"]; ok {
		t.Error("the pod without a sidecar was asked to renew")
	}
	fi, err := os.Stat(filepath.Join(c.cfg.Dir, "ca-root-2-key.pem"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("new root key: %v %v, want 0600", fi, err)
	}
	r, err := ca.LoadRoot(filepath.Join(c.cfg.Dir, CertFile), filepath.Join(c.cfg.Dir, KeyFile))
	if err != nil || ca.Info(r.Cert).Serial != st.Signing.Serial {
		t.Fatalf("run directory root is not the new one: %v", err)
	}
	if err := c.RotateRoot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(c.cfg.Dir, "ca-root-3-cert.pem")); err != nil {
		t.Fatalf("second rotation's root: %v", err)
	}
}

func TestRotationStopsAtAnAgentThatCannotRenewAndFinishesLater(t *testing.T) {
	t.Parallel()
	f := newFakeLab(t)
	c := newCA(t, f, false)
	f.paused["backend"] = true
	err := c.RotateRoot(context.Background())
	if !errors.Is(err, agentapi.ErrRenewalPaused) {
		t.Fatalf("rotation with a paused agent = %v, want ErrRenewalPaused", err)
	}
	if ph := c.Authority().State().Phase; ph != ca.PhaseTrustAdded {
		t.Fatalf("phase after the failed bundle push %s, want %s", ph, ca.PhaseTrustAdded)
	}
	ev := f.events[len(f.events)-1]
	if ev.Kind != EventCARotationFailed || ev.Fields["phase"] != ca.PhaseTrustAdded {
		t.Fatalf("last event %+v, want %s in phase %s", ev, EventCARotationFailed, ca.PhaseTrustAdded)
	}
	if err := c.RotateRootWith(context.Background(), []byte("x"), []byte("y")); !errors.Is(err, api.ErrCARequest) {
		t.Fatalf("a new root during a rotation = %v, want ErrCARequest", err)
	}
	f.paused["backend"] = false
	if err := c.RotateRoot(context.Background()); err != nil {
		t.Fatalf("finishing the rotation: %v", err)
	}
	st := c.Authority().State()
	if st.Phase != ca.PhaseStable || st.Signing.Subject != "meshlab root CA 2" {
		t.Fatalf("state after finishing %+v, want root 2 alone", st)
	}
}

func TestRotationRefusedWhileOneRuns(t *testing.T) {
	t.Parallel()
	f := newFakeLab(t)
	c := newCA(t, f, false)
	c.mu.Lock()
	err := c.RotateRoot(context.Background())
	c.mu.Unlock()
	if !errors.Is(err, api.ErrCARequest) {
		t.Fatalf("a second rotation = %v, want ErrCARequest", err)
	}
}

func TestRotateUserRootNeedsTheNewOne(t *testing.T) {
	t.Parallel()
	f := newFakeLab(t)
	c := newCA(t, f, true)
	if _, err := os.Stat(filepath.Join(c.cfg.Dir, KeyFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a user's root key was copied to the run directory: %v", err)
	}
	if err := c.RotateRoot(context.Background()); !errors.Is(err, api.ErrCARequest) {
		t.Fatalf("RotateRoot of a user-supplied root = %v, want ErrCARequest", err)
	}
	if c.Authority().State().Phase != ca.PhaseStable {
		t.Fatal("a refused rotation changed the CA")
	}
	if err := c.RotateRootWith(context.Background(), []byte("junk"), []byte("junk")); !errors.Is(err, api.ErrCARequest) {
		t.Fatalf("RotateRootWith(junk) = %v, want ErrCARequest", err)
	}
	next, err := ca.NewNamedRoot(ca.DefaultTrustDomain, "user root 2", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	if err := next.WriteFiles(cert, key); err != nil {
		t.Fatal(err)
	}
	certPEM, _ := os.ReadFile(cert)
	keyPEM, _ := os.ReadFile(key)
	if err := c.RotateRootWith(context.Background(), certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	if got := c.Authority().State().Signing.Subject; got != "user root 2" {
		t.Fatalf("signing root %q, want the user's", got)
	}
	if _, err := os.Stat(filepath.Join(c.cfg.Dir, KeyFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the user's new root key became the lab's: %v", err)
	}
	got, _ := os.ReadFile(filepath.Join(c.cfg.Dir, CertFile))
	if string(got) != string(certPEM) {
		t.Fatal("the run directory's root certificate is not the user's new one")
	}
}

func TestRenewCertsLeavesPausedAgentsAlone(t *testing.T) {
	t.Parallel()
	f := newFakeLab(t)
	c := newCA(t, f, false)
	before := f.certs["backend"].Serial
	if err := c.PauseCertRenewal(context.Background(), "backend", true); err != nil {
		t.Fatal(err)
	}
	if err := c.RenewCerts(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{EventCertPaused + " backend", EventCertRenewed + " frontend"}
	if got := f.kinds(); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	if f.certs["backend"].Serial != before {
		t.Fatal("a paused agent renewed")
	}
	f.down["frontend"] = true
	if err := c.RenewCerts(context.Background()); err == nil {
		t.Fatal("RenewCerts with an agent down = nil, want its error")
	}
}

func TestClockOffsetReachesNewCertificates(t *testing.T) {
	t.Parallel()
	f := newFakeLab(t)
	c := newCA(t, f, false)
	c.SetClockOffset(-25 * time.Hour)
	if _, err := f.AgentCert(context.Background(), "frontend", CertRenew); err != nil {
		t.Fatal(err)
	}
	if na := f.certs["frontend"].NotAfter; !na.Before(time.Now()) {
		t.Fatalf("a certificate issued 25 h back ends %s, want already expired", na)
	}
	c.SetClockOffset(0)
	if c.Authority().ClockOffset() != 0 {
		t.Fatal("offset not reset")
	}
	if len(f.events) != 2 || f.events[0].Kind != EventCAClock || f.events[0].Fields["offset"] != "-25h0m0s" || f.events[1].Message != "CA clock reset" {
		t.Fatalf("events %+v", f.events)
	}
}

func TestPauseCertRenewal(t *testing.T) {
	t.Parallel()
	f := newFakeLab(t)
	c := newCA(t, f, false)
	ctx := context.Background()
	if err := c.PauseCertRenewal(ctx, "nope", true); !errors.Is(err, api.ErrUnknownPod) {
		t.Fatalf("PauseCertRenewal(unknown) = %v, want ErrUnknownPod", err)
	}
	if err := c.PauseCertRenewal(ctx, "plain", true); !errors.Is(err, api.ErrNoSidecar) {
		t.Fatalf("PauseCertRenewal(plain) = %v, want ErrNoSidecar", err)
	}
	if err := c.PauseCertRenewal(ctx, "frontend", true); err != nil || !f.paused["frontend"] {
		t.Fatalf("pause = %v, paused %v", err, f.paused["frontend"])
	}
	if err := c.PauseCertRenewal(ctx, "frontend", false); err != nil || f.paused["frontend"] {
		t.Fatalf("resume = %v, paused %v", err, f.paused["frontend"])
	}
	if got, want := f.kinds(), []string{EventCertPaused + " frontend", EventCertResumed + " frontend"}; !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	f.down["backend"] = true
	if err := c.PauseCertRenewal(ctx, "backend", true); err == nil {
		t.Fatal("pausing an agent that does not answer = nil")
	}
}

func TestStatusNamesEachPodsIssuingRoot(t *testing.T) {
	t.Parallel()
	f := newFakeLab(t)
	c := newCA(t, f, false)
	f.down["backend"] = true
	st := c.Status(context.Background())
	signing := c.Authority().State().Signing
	if st.Phase != ca.PhaseStable || st.UserSupplied || st.Signing.Serial != signing.Serial || len(st.Bundle) != 1 || st.CrossSigned != nil {
		t.Fatalf("status %+v", st)
	}
	byPod := map[string]api.CAPodCert{}
	for _, p := range st.Pods {
		byPod[p.Pod] = p
	}
	if len(st.Pods) != 2 {
		t.Fatalf("pods %+v, want the two sidecars", st.Pods)
	}
	if fe := byPod["frontend"]; fe.IssuingRoot != signing.Serial || fe.Serial != f.certs["frontend"].Serial || !slices.Equal(fe.Bundle, []string{signing.Serial}) {
		t.Errorf("frontend %+v, want issued by %s", fe, signing.Serial)
	}
	if be := byPod["backend"]; be.Error == "" || be.IssuingRoot != "unknown" {
		t.Errorf("backend (agent down) %+v, want its error and an unknown root", be)
	}
}

func TestConfigCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{name: "defaults", cfg: Config{}},
		{name: "cert without key", cfg: Config{UserCertFile: junk}, want: "--ca-cert and --ca-key go together"},
		{name: "ttl too short", cfg: Config{TTL: time.Millisecond}, want: "cert ttl 1ms is below the minimum 1s"},
		{name: "root does not load", cfg: Config{UserCertFile: junk, UserKeyFile: junk}, want: "load --ca-cert/--ca-key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testutil.CheckErr(t, "Check()", tc.cfg.Check(), tc.want)
		})
	}
}
