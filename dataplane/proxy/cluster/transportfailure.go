package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"os"

	"github.com/meshlab/meshlab/dataplane/proxy/tlsctx"
)

// Envoy's SslSocket::drainErrorQueue writes a failed handshake's reason as
// "TLS_error:" then "|<packed error>:<lib>:<func>:<reason>" for each entry of BoringSSL's
// error queue, then ":TLS_error_end"; a certificate refused by its validator adds the
// validator's detail ("verify cert failed: verify SAN list") before the end marker. The
// packed numbers are BoringSSL's ERR_PACK(ERR_LIB_SSL, reason).
const (
	tlsVerifyFailed   = "TLS_error:|268435581:SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED"
	tlsWrongVersion   = "TLS_error:|268435703:SSL routines:OPENSSL_internal:WRONG_VERSION_NUMBER:TLS_error_end"
	tlsErrorEnd       = ":TLS_error_end"
	verifySANFailed   = ":verify cert failed: verify SAN list"
	statFailVerifySAN = "fail_verify_san"
)

// TransportFailureReason returns what Envoy records as the upstream transport failure
// reason (%UPSTREAM_TRANSPORT_FAILURE_REASON%) for an error of Dial or RoundTrip, or ""
// when the failure was not in the TLS handshake (a refused or timed-out connection has
// no transport failure reason in Envoy either).
//
// crypto/tls is not BoringSSL, so this is an approximation: a certificate the validator
// refused is CERTIFICATE_VERIFY_FAILED (with Envoy's SAN detail when the SAN did not
// match), a peer that does not speak TLS is WRONG_VERSION_NUMBER, exactly as Envoy
// writes them; any other handshake failure (an alert from the peer, for instance) is
// written in the same frame with Go's error text in place of BoringSSL's queue entry:
// "TLS_error:|<go error>:TLS_error_end".
func TransportFailureReason(err error) string {
	var he *tlsctx.HandshakeError
	if !errors.As(err, &he) {
		return ""
	}
	var ve *tlsctx.VerifyError
	var rh tls.RecordHeaderError
	switch {
	case errors.As(he.Err, &ve):
		if ve.Stat == statFailVerifySAN {
			return tlsVerifyFailed + verifySANFailed + tlsErrorEnd
		}
		return tlsVerifyFailed + tlsErrorEnd
	case errors.As(he.Err, &rh):
		return tlsWrongVersion
	case errors.Is(he.Err, context.DeadlineExceeded), errors.Is(he.Err, os.ErrDeadlineExceeded), errors.Is(he.Err, context.Canceled):
		return ""
	}
	return "TLS_error:|" + he.Err.Error() + tlsErrorEnd
}
