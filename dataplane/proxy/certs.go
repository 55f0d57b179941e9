package proxy

import (
	"crypto/x509"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshlab/meshlab/dataplane/proxy/admin"
)

var _ admin.CertsBackend = adminBackend{}

// Certs implements admin.CertsBackend.
func (b adminBackend) Certs() *adminv3.Certificates { return b.s.Certs() }

// Certs returns Envoy's /certs: one entry per SDS secret, its certificates as
// CertificateDetails (serial in hex, SANs, days until expiration) under cert_chain for a
// certificate or ca_cert for a validation context. Path is "<inline>" as Envoy prints
// for secrets that did not come from a file.
func (s *Server) Certs() *adminv3.Certificates {
	out := &adminv3.Certificates{}
	if s.secrets == nil {
		return out
	}
	for _, sec := range s.secrets.All() {
		c := &adminv3.Certificate{}
		switch {
		case sec.Cert != nil:
			for _, der := range sec.Cert.Certificate {
				if x, err := x509.ParseCertificate(der); err == nil {
					c.CertChain = append(c.CertChain, certDetails(x))
				}
			}
		default:
			for _, x := range sec.CAs {
				c.CaCert = append(c.CaCert, certDetails(x))
			}
		}
		out.Certificates = append(out.Certificates, c)
	}
	return out
}

func certDetails(x *x509.Certificate) *adminv3.CertificateDetails {
	d := &adminv3.CertificateDetails{
		Path:                "<inline>",
		SerialNumber:        x.SerialNumber.Text(16),
		DaysUntilExpiration: uint64(max(0, time.Until(x.NotAfter)/(24*time.Hour))),
		ValidFrom:           timestamppb.New(x.NotBefore),
		ExpirationTime:      timestamppb.New(x.NotAfter),
	}
	for _, u := range x.URIs {
		d.SubjectAltNames = append(d.SubjectAltNames, &adminv3.SubjectAlternateName{Name: &adminv3.SubjectAlternateName_Uri{Uri: u.String()}})
	}
	for _, n := range x.DNSNames {
		d.SubjectAltNames = append(d.SubjectAltNames, &adminv3.SubjectAlternateName{Name: &adminv3.SubjectAlternateName_Dns{Dns: n}})
	}
	return d
}
