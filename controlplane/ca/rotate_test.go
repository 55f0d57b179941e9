package ca

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"
)

// parseChain parses a PEM chain into certificates.
func parseChain(t *testing.T, chain []string) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	for _, p := range chain {
		b, _ := pem.Decode([]byte(p))
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

// splitChain returns the chain before the trailing self-signed roots and the roots.
func splitChain(certs []*x509.Certificate) (chain, roots []*x509.Certificate) {
	i := len(certs)
	for i > 1 && certs[i-1].CheckSignatureFrom(certs[i-1]) == nil {
		i--
	}
	return certs[:i], certs[i:]
}

// verifies reports whether the leaf of chain (with its intermediates) verifies against roots.
func verifies(chain []*x509.Certificate, roots ...*x509.Certificate) error {
	pool, inter := x509.NewCertPool(), x509.NewCertPool()
	for _, r := range roots {
		pool.AddCert(r)
	}
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return err
}

func TestRotationPhasesKeepEveryPairVerifying(t *testing.T) {
	t.Parallel()
	r1, err := NewRoot(DefaultTrustDomain, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	r2, err := NewNamedRoot(DefaultTrustDomain, "meshlab root CA 2", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c := newCA(t, Options{Root: r1})
	csr := csrFor(t, []string{"spiffe://cluster.local/ns/default/sa/backend"})
	issue := func() (chain, roots []*x509.Certificate) {
		t.Helper()
		pems, err := c.Sign(csr, backend, 0)
		if err != nil {
			t.Fatal(err)
		}
		return splitChain(parseChain(t, pems))
	}
	sameRoots := func(got []*x509.Certificate, want ...*x509.Certificate) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("bundle has %d roots, want %d", len(got), len(want))
		}
		for i := range want {
			if !got[i].Equal(want[i]) {
				t.Fatalf("bundle root %d is %s, want %s", i, got[i].Subject.CommonName, want[i].Subject.CommonName)
			}
		}
	}

	before, roots := issue()
	sameRoots(roots, r1.Cert)
	if len(before) != 1 {
		t.Fatalf("stable chain has %d certificates before the root, want 1", len(before))
	}

	// Step 1: bundle {R1, R2}, leaves still from R1.
	if err := c.SwitchSigning(); !errors.Is(err, ErrPhase) {
		t.Fatalf("SwitchSigning before AddRoot = %v, want ErrPhase", err)
	}
	if _, err := c.AddRoot(r2); err != nil {
		t.Fatal(err)
	}
	added, roots := issue()
	sameRoots(roots, r1.Cert, r2.Cert)
	if err := verifies(added, r1.Cert); err != nil {
		t.Fatalf("phase 1 leaf against {R1}: %v", err)
	}

	// Step 2: leaves from R2 with R2 cross-signed by R1: verify against {R1}, {R2}, {R1, R2}.
	if err := c.SwitchSigning(); err != nil {
		t.Fatal(err)
	}
	switched, roots := issue()
	sameRoots(roots, r1.Cert, r2.Cert)
	if len(switched) != 2 || switched[1].CheckSignatureFrom(r1.Cert) != nil || !strings.Contains(switched[1].Subject.CommonName, "2") {
		t.Fatalf("phase 2 chain is not [leaf, R2 cross-signed by R1]: %d certificates", len(switched))
	}
	for name, trust := range map[string][]*x509.Certificate{"{R1}": {r1.Cert}, "{R2}": {r2.Cert}, "{R1,R2}": {r1.Cert, r2.Cert}} {
		if err := verifies(switched, trust...); err != nil {
			t.Errorf("phase 2 leaf against %s: %v", name, err)
		}
	}
	// A phase 1 leaf (from R1) still verifies against the bundle peers have now.
	if err := verifies(added, r1.Cert, r2.Cert); err != nil {
		t.Errorf("phase 1 leaf against {R1,R2}: %v", err)
	}

	// Step 3: bundle {R2}, chain [leaf].
	if err := c.DropOldRoots(); err != nil {
		t.Fatal(err)
	}
	after, roots := issue()
	sameRoots(roots, r2.Cert)
	if len(after) != 1 {
		t.Fatalf("final chain has %d certificates before the root, want 1", len(after))
	}
	if err := verifies(after, r2.Cert); err != nil {
		t.Fatalf("final leaf against {R2}: %v", err)
	}
	if err := verifies(switched, r2.Cert); err != nil {
		t.Fatalf("phase 2 leaf against {R2}: %v", err)
	}
	if err := verifies(after, r1.Cert); err == nil {
		t.Fatal("final leaf verifies against {R1} alone")
	}
	if err := verifies(before, r2.Cert); err == nil {
		t.Fatal("an R1 leaf verifies against {R2}")
	}
	st := c.State()
	if st.Phase != PhaseStable || len(st.Bundle) != 1 || st.Signing.Serial != Info(r2.Cert).Serial || st.CrossSigned != nil {
		t.Fatalf("final state %+v", st)
	}
}

func TestClockOffsetShiftsValidity(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := newCA(t, Options{TTL: time.Hour, Now: func() time.Time { return now }})
	c.SetClockOffset(-25 * time.Hour)
	chain, err := c.Sign(csrFor(t, []string{"spiffe://cluster.local/ns/default/sa/backend"}), backend, 0)
	if err != nil {
		t.Fatal(err)
	}
	leaf, root := parseLeaf(t, chain)
	if want := now.Add(-24 * time.Hour); !leaf.NotAfter.Equal(want) {
		t.Fatalf("NotAfter %s, want %s", leaf.NotAfter, want)
	}
	pool := x509.NewCertPool()
	pool.AddCert(root)
	_, err = leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	var inv x509.CertificateInvalidError
	if !errors.As(err, &inv) || inv.Reason != x509.Expired {
		t.Fatalf("verify = %v, want expired", err)
	}
	c.SetClockOffset(0)
	if c.ClockOffset() != 0 {
		t.Fatal("offset not reset")
	}
}
