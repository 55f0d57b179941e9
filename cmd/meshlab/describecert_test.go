package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/internal/testutil"
)

func TestPrintCertProblems(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	root := api.CARef{Serial: "a1", Subject: "meshlab root CA", KeyID: "k1"}
	base := func() *api.WorkloadCert {
		return &api.WorkloadCert{SPIFFEID: "spiffe://cluster.local/ns/default/sa/backend", Serial: "3f2a9c",
			NotBefore: now.Add(-70 * time.Second), NotAfter: now.Add(-10 * time.Second), RotateAt: now.Add(-20 * time.Second), Rotations: 3,
			Trust: &api.CertTrust{Issuer: "meshlab root CA", IssuerKeyID: "k1", TrustBundle: []api.CARef{root}, Paused: true}}
	}
	for _, tc := range []struct {
		name string
		mod  func(*api.WorkloadCert)
	}{
		{"describe-cert-expired-paused", func(*api.WorkloadCert) {}},
		{"describe-cert-expired-clock", func(c *api.WorkloadCert) {
			c.Trust.Paused = false
			c.Error = "the CA issued a certificate valid only from 2026-01-01T02:04:05Z to 2026-01-02T02:04:05Z (is its clock shifted?)"
			c.Trust.ErrorAt = now.Add(-time.Second)
		}},
		{"describe-cert-not-yet-valid", func(c *api.WorkloadCert) {
			c.Trust.Paused = false
			c.NotBefore, c.NotAfter, c.RotateAt = now.Add(time.Hour), now.Add(25*time.Hour), now.Add(time.Minute)
		}},
		{"describe-cert-unknown-issuer", func(c *api.WorkloadCert) {
			c.Trust.Paused = false
			c.NotAfter, c.RotateAt = now.Add(time.Hour), now.Add(30*time.Minute)
			c.Trust.Issuer, c.Trust.IssuerKeyID = "meshlab root CA 2", "k2"
		}},
		{"describe-cert-rotating", func(c *api.WorkloadCert) {
			c.Trust.Paused = false
			c.NotAfter, c.RotateAt = now.Add(time.Hour), now.Add(30*time.Minute)
			c.Trust.Issuer, c.Trust.IssuerKeyID = "meshlab root CA 2", "k2"
			c.Trust.Intermediates = []api.CARef{{Serial: "c3", Subject: "meshlab root CA 2", KeyID: "k2"}}
			c.Trust.TrustBundle = append(c.Trust.TrustBundle, api.CARef{Serial: "b2", Subject: "meshlab root CA 2", KeyID: "k2"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.mod(c)
			var b bytes.Buffer
			printCert(&b, "backend-v1", c, now)
			testutil.Golden(t, tc.name, b.Bytes())
		})
	}
}
