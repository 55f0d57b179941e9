package agent

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"

	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/meshlab/meshlab/controlplane/ca"
	"github.com/meshlab/meshlab/internal/testutil"
)

// postCerts POSTs to a /certs endpoint of h and decodes the status it answers.
func postCerts(t *testing.T, h http.Handler, path string, wantCode int) agentapi.CertStatus {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, nil))
	if rec.Code != wantCode {
		t.Fatalf("POST %s = %d %s, want %d", path, rec.Code, rec.Body, wantCode)
	}
	var st agentapi.CertStatus
	if wantCode == http.StatusOK {
		if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// pemCerts parses every certificate of a PEM bundle.
func pemCerts(t *testing.T, b []byte) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return out
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
}

// TestRootRotationOverSDS drives the three rotation steps with POST /certs/renew (which
// answers once the stream ACKed) and checks what the open SDS stream receives after each: the bundle {R1, R2}, then a leaf
// from R2 with R2 cross-signed by R1 (which a peer trusting only R1 accepts), then {R2}.
func TestRootRotationOverSDS(t *testing.T) {
	t.Parallel()
	f := startSDS(t, time.Hour)
	h := withCertRoutes(http.NotFoundHandler(), f.certs, testutil.Logger(t))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	stream, err := f.client.StreamSecrets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{SecretDefault, SecretRootCA}
	if err := stream.Send(&discoverypb.DiscoveryRequest{TypeUrl: secretTypeURL, ResourceNames: names}); err != nil {
		t.Fatal(err)
	}
	// next reads the next push and ACKs it, as Envoy does: the default chain and the bundle.
	next := func() (chain, bundle []*x509.Certificate) {
		t.Helper()
		resp, secs := recvSecrets(t, stream)
		if err := stream.Send(&discoverypb.DiscoveryRequest{TypeUrl: secretTypeURL, VersionInfo: resp.GetVersionInfo(),
			ResponseNonce: resp.GetNonce(), ResourceNames: names}); err != nil {
			t.Fatal(err)
		}
		checkSecrets(t, secs)
		return pemCerts(t, secs[SecretDefault].GetTlsCertificate().GetCertificateChain().GetInlineBytes()),
			pemCerts(t, secs[SecretRootCA].GetValidationContext().GetTrustedCa().GetInlineBytes())
	}
	// renew POSTs /certs/renew, which answers only once the stream ACKed the new
	// secrets, while reading and ACKing the push.
	renew := func() (st agentapi.CertStatus, chain, bundle []*x509.Certificate) {
		t.Helper()
		rec := httptest.NewRecorder()
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/certs/renew", nil))
		}()
		chain, bundle = next()
		<-done
		if rec.Code != http.StatusOK {
			t.Fatalf("POST /certs/renew = %d %s", rec.Code, rec.Body)
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
			t.Fatal(err)
		}
		return st, chain, bundle
	}
	verifyWith := func(chain []*x509.Certificate, roots ...*x509.Certificate) error {
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
	r1 := f.root.Cert
	// The default secret's chain is the CA's whole answer, as Istio's agent serves it:
	// [leaf, R1] before the rotation.
	if chain, bundle := next(); len(chain) != 2 || !chain[1].Equal(r1) || len(bundle) != 1 || !bundle[0].Equal(r1) {
		t.Fatalf("initial secrets: chain %d, bundle %d", len(chain), len(bundle))
	}

	r2, err := ca.NewNamedRoot(ca.DefaultTrustDomain, "meshlab root CA 2", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ca.AddRoot(r2); err != nil {
		t.Fatal(err)
	}
	st, _, bundle := renew()
	if len(st.TrustBundle) != 2 || st.TrustBundle[1].Serial != serial(r2.Cert) {
		t.Fatalf("status trust bundle after step 1: %+v", st.TrustBundle)
	}
	if len(bundle) != 2 || !bundle[0].Equal(r1) || !bundle[1].Equal(r2.Cert) {
		t.Fatalf("ROOTCA after step 1 has %d roots, want {R1, R2}", len(bundle))
	}

	if err := f.ca.SwitchSigning(); err != nil {
		t.Fatal(err)
	}
	st, chain, bundle := renew()
	if len(st.Intermediates) != 1 || st.Issuer != "meshlab root CA 2" {
		t.Fatalf("status after step 2: issuer %q, intermediates %+v", st.Issuer, st.Intermediates)
	}
	if len(chain) != 4 || len(bundle) != 2 {
		t.Fatalf("after step 2: chain %d, bundle %d; want [leaf, cross, R1, R2] and {R1, R2}", len(chain), len(bundle))
	}
	if err := verifyWith(chain, r1); err != nil {
		t.Fatalf("step 2 chain against {R1} only: %v", err)
	}

	if err := f.ca.DropOldRoots(); err != nil {
		t.Fatal(err)
	}
	_, chain, bundle = renew()
	if len(chain) != 2 || len(bundle) != 1 || !bundle[0].Equal(r2.Cert) {
		t.Fatalf("after step 3: chain %d, bundle %d; want [leaf, R2] and {R2}", len(chain), len(bundle))
	}
	if err := verifyWith(chain, r2.Cert); err != nil {
		t.Fatalf("step 3 chain against {R2}: %v", err)
	}
}

func TestCertRenewalPause(t *testing.T) {
	t.Parallel()
	f := startSDS(t, time.Hour)
	h := withCertRoutes(http.NotFoundHandler(), f.certs, testutil.Logger(t))
	first := postCerts(t, h, "/certs/renew", http.StatusOK)
	if st := postCerts(t, h, "/certs/pause", http.StatusOK); !st.Paused || st.Serial != first.Serial {
		t.Fatalf("pause answered %+v", st)
	}
	postCerts(t, h, "/certs/renew", http.StatusConflict)
	if f.certs.snapshot().Serial != first.Serial {
		t.Fatal("the certificate changed while renewal was paused")
	}
	if st := postCerts(t, h, "/certs/resume", http.StatusOK); st.Paused {
		t.Fatal("resume answered paused")
	}
	if st := postCerts(t, h, "/certs/renew", http.StatusOK); st.Serial == first.Serial || st.Paused {
		t.Fatalf("renew after resume answered %+v", st)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/status", nil))
	if rec.Code != http.StatusNotFound {
		t.Fatalf("other paths do not reach the wrapped handler: %d", rec.Code)
	}
}

// TestPausedRenewalLetsTheCertificateExpire: with a 1 s TTL and renewal paused, the
// served certificate really expires and no new one is issued.
func TestPausedRenewalLetsTheCertificateExpire(t *testing.T) {
	t.Parallel()
	f := startSDS(t, time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for f.certs.snapshot().Serial == "" {
		if time.Now().After(deadline) {
			t.Fatal("no certificate")
		}
		time.Sleep(10 * time.Millisecond)
	}
	st := f.certs.setPaused(true)
	for time.Now().Before(st.NotAfter.Add(300 * time.Millisecond)) {
		time.Sleep(50 * time.Millisecond)
	}
	cur, _ := f.certs.current()
	if serial(cur.leaf) != f.certs.snapshot().Serial || !time.Now().After(cur.leaf.NotAfter) {
		t.Fatalf("served certificate %s (not after %s) is not the expired one", serial(cur.leaf), cur.leaf.NotAfter)
	}
}
