package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/meshlab/meshlab/api"
)

// printCert writes the workload certificate lines of `meshlab describe pod`, and a
// "Problem:" line when peers will refuse the certificate.
func printCert(w io.Writer, pod string, c *api.WorkloadCert, now time.Time) {
	if c == nil {
		return
	}
	fmt.Fprintf(w, "Certificate:\t%s\n", c.SPIFFEID)
	t := c.Trust
	if c.Serial != "" {
		fmt.Fprintf(w, "  Serial:\t%s\n", c.Serial)
		fmt.Fprintf(w, "  Not after:\t%s (in %s)\n", c.NotAfter.UTC().Format(time.RFC3339), c.NotAfter.Sub(now).Round(time.Second))
		switch {
		case t != nil && t.Paused:
			fmt.Fprintf(w, "  Rotation:\tpaused (rotated %d times)\n", c.Rotations)
		default:
			fmt.Fprintf(w, "  Rotation:\tin %s (rotated %d times)\n", c.RotateAt.Sub(now).Round(time.Second), c.Rotations)
		}
	}
	if t != nil && c.Serial != "" {
		fmt.Fprintf(w, "  Issuer:\t%s\n", t.Issuer)
		for _, i := range t.Intermediates {
			fmt.Fprintf(w, "  Chain:\t%s %s (cross-signed)\n", i.Serial, i.Subject)
		}
		var roots []string
		for _, r := range t.TrustBundle {
			roots = append(roots, r.Serial+" "+r.Subject)
		}
		fmt.Fprintf(w, "  Trusts:\t%s\n", strings.Join(roots, ", "))
	}
	if c.Error != "" {
		fmt.Fprintf(w, "  Error:\t%s\n", c.Error)
	}
	if p := certProblem(pod, c, now); p != "" {
		fmt.Fprintf(w, "  Problem:\t%s\n", p)
	}
}

// certProblem explains why peers will refuse c, with what error, since when, why it was
// not renewed and what to do; "" when nothing is wrong. The wording of the errors is
// what the proxies log (Go crypto/x509 and crypto/tls).
func certProblem(pod string, c *api.WorkloadCert, now time.Time) string {
	if c.Serial == "" {
		if c.Error == "" {
			return ""
		}
		return "the pod has no workload certificate yet, so mTLS connections to and from it fail; " +
			"the CA refused or was not reachable (see Error); check `meshlab logs` of the lab"
	}
	t := c.Trust
	why := func() string {
		switch {
		case t != nil && t.Paused:
			return fmt.Sprintf("renewal is paused (fix: meshlab ca renewal %s --resume)", pod)
		case c.Error != "":
			since := ""
			if t != nil && !t.ErrorAt.IsZero() {
				since = " at " + t.ErrorAt.UTC().Format(time.RFC3339)
			}
			return fmt.Sprintf("the last renewal%s failed: %s (fix: meshlab ca clock --reset if the CA clock is shifted, else see the CA)", since, c.Error)
		}
		return "renewal has not run yet"
	}
	verifyErr := func(detail string) string {
		return fmt.Sprintf("peers' proxies refuse it: their TLS handshake fails with \"tls handshake: verify certificate chain: x509: %s\" "+
			"(Envoy's CERTIFICATE_VERIFY_FAILED; counted in ssl.fail_verify_error), and this pod's proxy sees \"remote error: tls: bad certificate\"", detail)
	}
	switch {
	case now.After(c.NotAfter):
		return fmt.Sprintf("certificate expired %s ago, at %s: %s; %s",
			now.Sub(c.NotAfter).Round(time.Second), c.NotAfter.UTC().Format(time.RFC3339),
			verifyErr(fmt.Sprintf("certificate has expired or is not yet valid: current time %s is after %s",
				now.UTC().Format(time.RFC3339), c.NotAfter.UTC().Format(time.RFC3339))), why())
	case now.Before(c.NotBefore):
		return fmt.Sprintf("certificate is not valid until %s (in %s): %s; %s",
			c.NotBefore.UTC().Format(time.RFC3339), c.NotBefore.Sub(now).Round(time.Second),
			verifyErr(fmt.Sprintf("certificate has expired or is not yet valid: current time %s is before %s",
				now.UTC().Format(time.RFC3339), c.NotBefore.UTC().Format(time.RFC3339))), why())
	}
	if t == nil || t.IssuerKeyID == "" || len(t.TrustBundle) == 0 {
		return ""
	}
	for _, r := range t.TrustBundle {
		if r.KeyID == t.IssuerKeyID {
			return ""
		}
	}
	return fmt.Sprintf("its issuer %q is not in its own trust bundle, so peers with the same bundle refuse it: %s; "+
		"a root rotation is probably unfinished (fix: meshlab ca rotate-root to finish it, then meshlab ca status)",
		t.Issuer, verifyErr("certificate signed by unknown authority"))
}
