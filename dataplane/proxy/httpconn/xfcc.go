package httpconn

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"net/http"
	"strings"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
)

// XFCCMode is the HCM's forward_client_cert_details, with Envoy's enum values.
type XFCCMode int

// forward_client_cert_details values.
const (
	XFCCSanitize XFCCMode = iota
	XFCCForwardOnly
	XFCCAppendForward
	XFCCSanitizeSet
	XFCCAlwaysForwardOnly
)

// XFCC is how the HCM sets x-forwarded-client-cert.
type XFCC struct {
	Mode              XFCCMode
	Subject, URI, DNS bool // set_current_client_cert_details
}

func xfccFrom(h *hcmv3.HttpConnectionManager) XFCC {
	d := h.GetSetCurrentClientCertDetails()
	return XFCC{
		Mode:    XFCCMode(h.GetForwardClientCertDetails()),
		Subject: d.GetSubject().GetValue(), URI: d.GetUri(), DNS: d.GetDns(),
	}
}

const xfccHeader = "X-Forwarded-Client-Cert"

// apply mutates the request's x-forwarded-client-cert as Envoy's
// ConnectionManagerUtility::mutateXfccRequestHeader does: without a client certificate
// only FORWARD_ONLY and ALWAYS_FORWARD_ONLY keep the header; with one, APPEND_FORWARD
// appends and SANITIZE_SET replaces it with By (local URI SANs), Hash (SHA-256 of the
// peer certificate), and the Subject, URI and DNS elements asked for.
func (c XFCC) apply(h http.Header, cs *tls.ConnectionState, local *x509.Certificate) {
	if c.Mode == XFCCAlwaysForwardOnly {
		return
	}
	if cs == nil || len(cs.PeerCertificates) == 0 {
		if c.Mode != XFCCForwardOnly {
			h.Del(xfccHeader)
		}
		return
	}
	switch c.Mode {
	case XFCCForwardOnly:
		return
	case XFCCSanitize:
		h.Del(xfccHeader)
		return
	}
	peer := cs.PeerCertificates[0]
	var parts []string
	if local != nil {
		for _, u := range local.URIs {
			parts = append(parts, "By="+u.String())
		}
	}
	sum := sha256.Sum256(peer.Raw)
	parts = append(parts, "Hash="+hex.EncodeToString(sum[:]))
	if c.Subject {
		parts = append(parts, `Subject="`+peer.Subject.String()+`"`)
	}
	if c.URI {
		for _, u := range peer.URIs {
			parts = append(parts, "URI="+u.String())
		}
	}
	if c.DNS {
		for _, d := range peer.DNSNames {
			parts = append(parts, "DNS="+d)
		}
	}
	value := strings.Join(parts, ";")
	if old := h.Get(xfccHeader); c.Mode == XFCCAppendForward && old != "" {
		value = old + "," + value
	}
	h.Set(xfccHeader, value)
}
