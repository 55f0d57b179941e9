package config

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// Sidecar (networking.istio.io v1alpha3, v1beta1, v1) is read for its ingress listeners,
// what Istio's "Sidecar TLS termination" task uses: each replaces the inbound ports of the
// pods the Sidecar selects (workloadSelector, else its whole namespace) with its port,
// protocol and defaultEndpoint (127.0.0.1:PORT, 0.0.0.0:PORT, [::1]:PORT, [::]:PORT), and
// with ENABLE_TLS_ON_SIDECAR_INGRESS its tls (SIMPLE or MUTUAL from certificate files the
// proxy's volumes hold) terminates TLS there. Istio's validation is applied as istiod's
// webhook (validation.go's ValidateSidecar ingress part); what would change behaviour and
// is not built is refused by name: egress, outboundTrafficPolicy, inboundConnectionPool,
// an ingress's bind, captureMode, connectionPool and unix defaultEndpoint, TLS options.

func sidecarPaths() string {
	return strings.Join([]string{
		"workloadSelector workloadSelector.labels ingress",
		expand("ingress", "port defaultEndpoint tls"),
		expand("ingress.port", "number protocol name"),
		// credentialName, credentialNames, subjectAltNames, httpsRedirect and
		// tlsCertificates are read to refuse them with istiod's messages.
		expand("ingress.tls", "mode serverCertificate privateKey caCertificates credentialName credentialNames subjectAltNames httpsRedirect tlsCertificates"),
	}, " ")
}

var sidecarFields = lazyFields(sidecarPaths)

// validateSidecar checks a Sidecar on its own, as istiod's ValidateSidecar does for the
// parts meshlab reads.
func validateSidecar(s *networking.Sidecar, p problems) {
	refuseUnimplemented(s.ProtoReflect(), sidecarFields(), "Sidecar", p)
	for _, k := range sortedKeysOf(s.GetWorkloadSelector().GetLabels()) {
		if k == "" {
			p.addf("spec.workloadSelector.labels", "a label key must not be empty")
		}
	}
	if len(s.GetIngress()) == 0 && len(s.GetEgress()) == 0 && s.GetOutboundTrafficPolicy() == nil && s.GetInboundConnectionPool() == nil {
		p.addf("spec", "sidecar: empty configuration provided")
	}
	ports := map[uint32]bool{}
	for i, in := range s.GetIngress() {
		f := fmt.Sprintf("spec.ingress[%d]", i)
		if in.GetPort() == nil {
			p.addf(f+".port", "sidecar: port is required for ingress listeners")
			continue
		}
		n := in.GetPort().GetNumber()
		if n == 0 || n > 65535 {
			p.addf(f+".port.number", "port number %d must be in the range 1..65535", n)
		}
		if ports[n] {
			p.addf(f+".port.number", "sidecar: ports on IP bound listeners must be unique")
		}
		ports[n] = true
		if _, ok := parseProtocol(in.GetPort().GetProtocol()); !ok {
			p.addf(f+".port.protocol", "%q is not a protocol meshlab reads (HTTP, HTTP2, GRPC, HTTPS, TLS, TCP...)", in.GetPort().GetProtocol())
		}
		if in.GetDefaultEndpoint() != "" {
			if _, err := model.ParseSidecarEndpoint(in.GetDefaultEndpoint()); err != nil {
				p.addf(f+".defaultEndpoint", "%v", err)
			}
		}
		if t := in.GetTls(); t != nil {
			checkSidecarIngressTLS(t, in.GetPort().GetProtocol(), f+".tls", p)
		}
	}
}

// checkSidecarIngressTLS is istiod's validation of an ingress's tls, and meshlab's: the
// certificate files are the proxy's (its user volumes), given as absolute paths.
func checkSidecarIngressTLS(t *networking.ServerTLSSettings, protocol, f string, p problems) {
	switch {
	case len(t.GetSubjectAltNames()) > 0:
		p.addf(f+".subjectAltNames", "sidecar: subjectAltNames is not supported in ingress tls")
	case t.GetHttpsRedirect():
		p.addf(f+".httpsRedirect", "sidecar: httpsRedirect is not supported")
	case t.GetCredentialName() != "":
		p.addf(f+".credentialName", "sidecar: credentialName is not currently supported")
	case len(t.GetCredentialNames()) > 0:
		p.addf(f+".credentialNames", "sidecar: credentialNames is not currently supported")
	case len(t.GetTlsCertificates()) > 0:
		p.addf(f+".tlsCertificates", "sidecar: tls_certificates is not currently supported")
	}
	switch t.GetMode() {
	case networking.ServerTLSSettings_SIMPLE, networking.ServerTLSSettings_MUTUAL:
	case networking.ServerTLSSettings_ISTIO_MUTUAL, networking.ServerTLSSettings_AUTO_PASSTHROUGH:
		p.addf(f+".mode", "configuration is invalid: cannot set mode to %s in sidecar ingress tls", t.GetMode())
	default:
		p.addf(f+".mode", "%s is not a mode meshlab terminates on a sidecar (SIMPLE, MUTUAL)", t.GetMode())
	}
	if pr, ok := parseProtocol(protocol); !ok || !pr.IsTLS() {
		p.addf(f, "server cannot have TLS settings for non HTTPS/TLS ports")
	}
	for _, c := range []struct{ name, path string }{{"serverCertificate", t.GetServerCertificate()}, {"privateKey", t.GetPrivateKey()}} {
		if c.path == "" {
			p.addf(f+"."+c.name, "is required for mode %s (a file of the proxy's volumes: sidecar.istio.io/userVolumeMount)", t.GetMode())
		}
	}
	if t.GetMode() == networking.ServerTLSSettings_MUTUAL && t.GetCaCertificates() == "" {
		p.addf(f+".caCertificates", "is required for mode MUTUAL (the CA that signs the clients' certificates)")
	}
	for _, c := range []struct{ name, path string }{{"serverCertificate", t.GetServerCertificate()}, {"privateKey", t.GetPrivateKey()}, {"caCertificates", t.GetCaCertificates()}} {
		if c.path != "" && (!strings.HasPrefix(c.path, "/") || strings.Contains(c.path, "~")) {
			p.addf(f+"."+c.name, "%q: an absolute path in the istio-proxy container, without ~", c.path)
		}
	}
}

// sidecarModel is the model form of a Sidecar.
func sidecarModel(o *Object) *model.IstioConfig[*networking.Sidecar] {
	s := proto.Clone(o.Sidecar).(*networking.Sidecar)
	if len(s.GetWorkloadSelector().GetLabels()) == 0 {
		s.WorkloadSelector = nil
	}
	return &model.IstioConfig[*networking.Sidecar]{Name: o.Origin.Name, Namespace: o.Origin.Namespace, Spec: s, Origin: o.Origin}
}
