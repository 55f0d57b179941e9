package config

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	networking "istio.io/api/networking/v1alpha3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/meshlab/meshlab/controlplane/model"
)

// Gateways, as Istio's networking.istio.io Gateway: the servers a gateway proxy exposes
// (port, hosts, TLS), bound to the gateway pods its selector matches. meshlab makes those
// pods as `istioctl install --set profile=demo` does (gatewayDeployments): a Gateway
// selecting `istio: ingressgateway` brings istio-system/istio-ingressgateway, one
// selecting `istio: egressgateway` brings istio-egressgateway.

var gatewayFields = lazyFields(func() string {
	return strings.Join([]string{
		"selector servers",
		expand("servers", "port hosts tls name"),
		expand("servers.port", "number protocol name"),
		expand("servers.tls", "mode credentialName"),
	}, " ")
})

// gatewayProtocols are the server protocols meshlab serves, as Istio spells them.
var gatewayProtocols = []string{"HTTP", "HTTP2", "GRPC", "HTTPS", "TCP", "TLS"}

// gatewayNamespace is where istioctl installs its gateways.
const gatewayNamespace = "istio-system"

// validateGateway checks a Gateway on its own, as Istio's ValidateGateway, refusing what
// meshlab does not serve by name.
func validateGateway(gw *networking.Gateway, p problems) {
	refuseUnimplemented(gw.ProtoReflect(), gatewayFields(), "Gateway", p)
	if len(gw.GetSelector()) == 0 {
		p.addf("spec.selector", "is required: meshlab's gateways are %s and %s", describeGateway(model.IngressGatewayName), describeGateway(model.EgressGatewayName))
	} else if len(selectedGateways(gw)) == 0 {
		p.addf("spec.selector", "%s selects no gateway: meshlab makes %s and %s, as istioctl's demo profile",
			formatLabels(gw.GetSelector()), describeGateway(model.IngressGatewayName), describeGateway(model.EgressGatewayName))
	}
	if len(gw.GetServers()) == 0 {
		p.addf("spec.servers", "at least one server is required")
	}
	plain := map[uint32]string{} // port -> protocol of a server without TLS termination by SNI
	for i, s := range gw.GetServers() {
		f := fmt.Sprintf("spec.servers[%d]", i)
		port := s.GetPort()
		if port == nil {
			p.addf(f+".port", "is required")
			continue
		}
		if msg := checkPort(int64(port.GetNumber())); msg != "" {
			p.addf(f+".port.number", "%s", msg)
		}
		if port.GetName() == "" {
			p.addf(f+".port.name", "is required")
		}
		proto := strings.ToUpper(port.GetProtocol())
		if !slices.Contains(gatewayProtocols, proto) {
			p.addf(f+".port.protocol", "%q is not a protocol meshlab serves on a gateway (%s)", port.GetProtocol(), strings.Join(gatewayProtocols, ", "))
		}
		if len(s.GetHosts()) == 0 {
			p.addf(f+".hosts", "at least one host is required")
		}
		for j, h := range s.GetHosts() {
			checkGatewayHost(h, fmt.Sprintf("%s.hosts[%d]", f, j), p)
		}
		checkServerTLS(s, proto, f, p)
		// Istio: servers sharing a port must all be HTTPS or TLS (told apart by SNI).
		if !sniServer(s, proto) {
			if prev, ok := plain[port.GetNumber()]; ok {
				p.addf(f+".port.number", "%d is already the port of a %s server: only HTTPS and TLS servers may share a port", port.GetNumber(), prev)
			}
			plain[port.GetNumber()] = proto
		}
	}
}

// sniServer reports whether a server is told apart from others on its port by SNI.
func sniServer(s *networking.Server, proto string) bool {
	return (proto == "HTTPS" || proto == "TLS") && s.GetTls() != nil
}

func checkServerTLS(s *networking.Server, proto, f string, p problems) {
	t := s.GetTls()
	switch {
	case t == nil && (proto == "HTTPS" || proto == "TLS"):
		p.addf(f+".tls", "is required for a %s server", proto)
		return
	case t == nil:
		return
	case proto != "HTTPS" && proto != "TLS":
		p.addf(f+".tls", "is only read on HTTPS and TLS servers (protocol is %s)", proto)
		return
	}
	switch t.GetMode() {
	case networking.ServerTLSSettings_SIMPLE, networking.ServerTLSSettings_MUTUAL:
		if t.GetCredentialName() == "" {
			p.addf(f+".tls.credentialName", "is required for mode %s (the name of a Secret in %s)", t.GetMode(), gatewayNamespace)
		}
	case networking.ServerTLSSettings_ISTIO_MUTUAL:
		// The gateway's workload certificate, clients of the mesh (a sidecar's
		// ISTIO_MUTUAL, as the egress gateway tasks send); no credential.
		if t.GetCredentialName() != "" {
			p.addf(f+".tls.credentialName", "is not read with mode ISTIO_MUTUAL (the gateway presents its workload certificate)")
		}
	case networking.ServerTLSSettings_PASSTHROUGH:
		// The client's TLS goes through untouched, routed by SNI with the bound
		// VirtualServices' tls routes; a credentialName is ignored, as by istiod.
	default:
		p.addf(f+".tls.mode", "%s is not supported by meshlab (SIMPLE, MUTUAL, ISTIO_MUTUAL, PASSTHROUGH)", t.GetMode())
	}
}

// checkGatewayHost checks a server host as Istio's validateNamespaceSlashWildcardHostname:
// "[namespace/]host" where namespace is "*", "." or a namespace name, and host is "*",
// "*.<domain>" or a DNS name.
func checkGatewayHost(h, f string, p problems) {
	ns, host, ok := strings.Cut(h, "/")
	if !ok {
		ns, host = "*", h
	}
	if ns != "*" && ns != "." {
		if msg := checkDNSLabel(ns, 63); msg != "" {
			p.addf(f, "%q: namespace %s", h, msg)
		}
	}
	checkWildcardHost(host, h, f, p)
}

// checkWildcardHost records a problem when host is neither "*", "*.<domain>" nor a
// lowercase DNS name (written is what the user wrote, for the message).
func checkWildcardHost(host, written, f string, p problems) {
	name := strings.TrimPrefix(host, "*.")
	switch {
	case host == "*":
	case host == "":
		p.addf(f, "must not be empty")
	case strings.Contains(name, "*"):
		p.addf(f, "%q: a wildcard is only accepted as the whole host or its first label (\"*\" or \"*.example.com\")", written)
	case strings.ToLower(name) != name || strings.ContainsAny(name, " /:") || strings.HasPrefix(name, ".") || strings.HasSuffix(name, "."):
		p.addf(f, "%q is not a lowercase DNS name", written)
	}
}

// checkVirtualServiceGateways checks a VirtualService's gateways and hosts: a name is
// "mesh" or "[namespace/]gateway"; bound to the mesh its hosts name services or cover
// them ("*.<domain>", applying to the services whose hosts it covers, as Istio's; not
// "*" alone, as meshlab's sidecars route by service), bound only to gateways they are
// the names clients use, "*" and "*.<domain>" included, as Istio accepts them.
func checkVirtualServiceGateways(vs *networking.VirtualService, p problems) {
	for i, g := range vs.GetGateways() {
		if g == model.MeshGateway {
			continue
		}
		f := fmt.Sprintf("spec.gateways[%d]", i)
		ns, name, ok := strings.Cut(g, "/")
		if ok {
			if msg := checkDNSLabel(ns, 63); msg != "" {
				p.addf(f, "%q: namespace %s", g, msg)
			}
		} else {
			name = ns
		}
		if msg := checkDNSLabel(name, 253); msg != "" {
			p.addf(f, "%q: gateway name %s", g, msg)
		}
	}
	if model.AppliesToMesh(vs) {
		if len(vs.GetHosts()) == 0 {
			p.addf("spec.hosts", "at least one host is required")
		}
		for i, h := range vs.GetHosts() {
			hf := fmt.Sprintf("spec.hosts[%d]", i)
			if strings.HasPrefix(h, "*.") {
				checkWildcardHost(h, h, hf, p) // it applies to the services it covers (xds virtualServiceFor)
			} else {
				checkHost(h, hf, p)
			}
		}
		return
	}
	if len(vs.GetHosts()) == 0 {
		p.addf("spec.hosts", "at least one host is required")
	}
	for i, h := range vs.GetHosts() {
		checkWildcardHost(h, h, fmt.Sprintf("spec.hosts[%d]", i), p)
	}
}

// selectedGateways returns the names of meshlab's gateway deployments a Gateway's
// selector matches.
func selectedGateways(gw *networking.Gateway) []string {
	var out []string
	if len(gw.GetSelector()) == 0 {
		return nil
	}
	for _, name := range []string{model.IngressGatewayName, model.EgressGatewayName} {
		if (&model.Service{Selector: gw.GetSelector()}).Selects(model.GatewayLabels(name)) {
			out = append(out, name)
		}
	}
	return out
}

func describeGateway(name string) string {
	return fmt.Sprintf("%s/%s (%s)", gatewayNamespace, name, formatLabels(map[string]string{"istio": model.GatewayLabels(name)["istio"]}))
}

// gatewayServicePorts are the ports of the gateway Services of istioctl's demo profile
// (manifests/charts/base/files/profile-demo.yaml): HTTP on 80 and HTTPS on 443 to the
// proxy's unprivileged 8080 and 8443, and on the ingress gateway its status port, tcp
// 31400 (the TCP tasks' $TCP_INGRESS_PORT) and tls 15443, each to the same port.
func gatewayServicePorts(name string) []model.ServicePort {
	ports := []model.ServicePort{
		{Name: "http2", Port: 80, TargetPort: 8080, Protocol: model.ProtocolHTTP2},
		{Name: "https", Port: 443, TargetPort: 8443, Protocol: model.ProtocolHTTPS},
	}
	if name == model.IngressGatewayName {
		ports = append([]model.ServicePort{{Name: "status-port", Port: 15021, TargetPort: 15021, Protocol: model.ProtocolTCP}}, ports...)
		ports = append(ports,
			model.ServicePort{Name: "tcp", Port: 31400, TargetPort: 31400, Protocol: model.ProtocolTCP},
			model.ServicePort{Name: "tls", Port: 15443, TargetPort: 15443, Protocol: model.ProtocolTLS})
	}
	return ports
}

// gatewayDeployments returns the gateway Services and pods the objects' Gateways need,
// as istioctl's demo profile makes them in istio-system: for each of
// istio-ingressgateway and istio-egressgateway that `meshlab install` installed (its
// profile's gateways, kept while the install is) or a Gateway selects (the ingress
// gateway also for an Ingress istiod takes), a Service with its ports and one pod (named
// as its Deployment's) running the proxy as a router.
func gatewayDeployments(objs []*Object) ([]*model.Service, []*model.Pod, error) {
	need := map[string]bool{}
	installed := map[string]installedGateway{}
	for _, g := range installedGateways(objs) {
		need[g.Name] = true
		installed[g.Name] = g
	}
	for _, o := range objs {
		if o.Gateway != nil {
			for _, n := range selectedGateways(o.Gateway) {
				need[n] = true
			}
		}
		if IsIstioIngress(objs, o) {
			need[model.IngressGatewayName] = true // its Gateway selects the ingress gateway (ingress.go)
		}
	}
	var svcs []*model.Service
	var pods []*model.Pod
	for _, name := range slices.Sorted(maps.Keys(need)) {
		for _, o := range objs {
			if o.Origin.Namespace == gatewayNamespace && o.Origin.Name == name && (o.svc != nil || o.kube != nil || o.Workload != nil) {
				return nil, nil, fmt.Errorf("%s: meshlab makes %s/%s itself for the lab's Gateways, as istioctl install does; remove this object", o.Origin, gatewayNamespace, name)
			}
		}
		origin := model.Origin{File: "istioctl install --set profile=demo", Kind: "Deployment", Namespace: gatewayNamespace, Name: name}
		labels := model.GatewayLabels(name)
		svcs = append(svcs, &model.Service{
			Name: name, Namespace: gatewayNamespace, Ports: gatewayServicePorts(name), Selector: labels,
			Origin: model.Origin{File: origin.File, Kind: "Service", Namespace: gatewayNamespace, Name: name},
		})
		// The install's k8s.podAnnotations and k8s.env go on the Deployment's pod
		// template, as istioctl's gateway chart writes them: a change makes a new pod.
		k8s := installed[name].K8s
		tmpl := &corev1.PodTemplateSpec{}
		tmpl.Labels = labels
		tmpl.Annotations = maps.Clone(k8s.PodAnnotations)
		tmpl.Spec.ServiceAccountName = name + "-service-account"
		tmpl.Spec.Containers = []corev1.Container{{Name: "istio-proxy", Image: proxyImage, Args: []string{"proxy", "router"}, Env: k8s.Env}}
		podName := suffixedNames(name+"-"+podTemplateHash(tmpl), 1)[0]
		pod := &model.Pod{
			Name: podName, Namespace: gatewayNamespace, Workload: name, Labels: maps.Clone(labels),
			Annotations:    maps.Clone(k8s.PodAnnotations),
			ServiceAccount: tmpl.Spec.ServiceAccountName,
			App:            model.AppSpec{Image: proxyImage},
			Sidecar:        model.SidecarSpec{Inject: true},
			Router:         true,
			Origin:         origin,
		}
		// pilot-agent's proxyMetadata: the mesh's, the pod's proxy.istio.io/config, then
		// the istio-proxy container's environment (the page's ENVOY_SECURE_* env).
		applyProxyMetadata(pod, mergeProxyMetadata(meshProxyMetadata(objs), proxyMetadata(tmpl.Annotations), envMap(k8s.Env)))
		pod.Sidecar.Tracing = proxyConfigTracing(tmpl.Annotations) // proxyconfig_tracing.go
		pods = append(pods, pod)
	}
	return svcs, pods, nil
}

// InstalledStateAnnotation is the MeshConfig annotation in which `meshlab install`
// keeps the IstioOperator it installed (istioctl's installed-state; cmd/meshlab writes
// it under the same name).
const InstalledStateAnnotation = "meshlab.dev/installed-state"

// installedGateways returns the gateways the install in the objects' MeshConfig turned
// on (its IstioOperator's spec.components ingressGateways and egressGateways that are
// enabled, of the two meshlab makes), none without an install.
func installedGateways(objs []*Object) []installedGateway {
	var out []installedGateway
	for _, o := range objs {
		if o.MeshConfig == nil {
			continue
		}
		ingress, egress, ok := installedComponents(o.JSON)
		if !ok {
			continue // not install's: the lab makes gateways for config alone
		}
		for _, g := range append(ingress, egress...) {
			if g.Enabled && (g.Name == model.IngressGatewayName || g.Name == model.EgressGatewayName) {
				out = append(out, g)
			}
		}
	}
	return out
}

// PilotEnvTLSOnSidecarIngress is istiod's feature flag for a Sidecar's ingress tls, which
// install keeps in its installed-state's values.pilot.env as istioctl writes it.
const PilotEnvTLSOnSidecarIngress = "ENABLE_TLS_ON_SIDECAR_INGRESS"

// installedPilotEnv returns istiod's environment the install kept on MeshConfig o (its
// installed-state's spec.values.pilot.env), empty without an install.
func installedPilotEnv(o *Object) map[string]string {
	var mc struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if json.Unmarshal(o.JSON, &mc) != nil || mc.Metadata.Annotations[InstalledStateAnnotation] == "" {
		return nil
	}
	var iop struct {
		Spec struct {
			Values struct {
				Pilot struct {
					Env map[string]any `json:"env"`
				} `json:"pilot"`
			} `json:"values"`
		} `json:"spec"`
	}
	if json.Unmarshal([]byte(mc.Metadata.Annotations[InstalledStateAnnotation]), &iop) != nil {
		return nil
	}
	out := map[string]string{}
	for k, v := range iop.Spec.Values.Pilot.Env {
		out[k] = fmt.Sprint(v)
	}
	return out
}

type installedGateway struct {
	Name    string `json:"name"`
	Enabled bool   `json:"enabled"`
	// K8s is the part of the component's k8s settings install takes (cmd/meshlab
	// refuses the others by name): the pod template's annotations and the istio-proxy
	// container's environment.
	K8s struct {
		PodAnnotations map[string]string `json:"podAnnotations"`
		Env            []corev1.EnvVar   `json:"env"`
	} `json:"k8s"`
}

// installedComponents decodes the gateways of the IstioOperator a MeshConfig object's
// installed-state annotation keeps (spec.components ingressGateways and egressGateways);
// ok is false for a MeshConfig without one, or one that does not decode.
func installedComponents(js []byte) (ingress, egress []installedGateway, ok bool) {
	var mc struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if json.Unmarshal(js, &mc) != nil || mc.Metadata.Annotations[InstalledStateAnnotation] == "" {
		return nil, nil, false
	}
	var iop struct {
		Spec struct {
			Components struct {
				IngressGateways []installedGateway `json:"ingressGateways"`
				EgressGateways  []installedGateway `json:"egressGateways"`
			} `json:"components"`
		} `json:"spec"`
	}
	if json.Unmarshal([]byte(mc.Metadata.Annotations[InstalledStateAnnotation]), &iop) != nil {
		return nil, nil, false
	}
	return iop.Spec.Components.IngressGateways, iop.Spec.Components.EgressGateways, true
}

// checkInstalledGatewayK8s refuses, in the gateways' k8s settings of the installed-state
// a MeshConfig keeps (install's components, or a patch of the gateway's Deployment), a
// proxy.istio.io/config pod annotation or an istio-proxy environment whose OUTPUT_CERTS
// or secure metrics port is bad, as on a pod template.
func checkInstalledGatewayK8s(js []byte, p problems) {
	ingress, egress, ok := installedComponents(js)
	if !ok {
		return
	}
	for kind, gws := range map[string][]installedGateway{"ingressGateways": ingress, "egressGateways": egress} {
		for i, g := range gws {
			f := fmt.Sprintf("metadata.annotations[%s].spec.components.%s[%d].k8s", InstalledStateAnnotation, kind, i)
			checkProxyConfigAnnotation(g.K8s.PodAnnotations, f+".podAnnotations", p) // proxyconfig_annotation.go
			env := envMap(g.K8s.Env)
			if d, ok := env[outputCertsMetadata]; ok && d != "" && !path.IsAbs(d) {
				p.addf(f+".env."+outputCertsMetadata, "%q is not an absolute path", d)
			}
			secureMetrics(env, f+".env", p)
		}
	}
}

// envMap returns a container's environment of literal values by name (later entries win,
// as the kubelet sets them in order).
func envMap(env []corev1.EnvVar) map[string]string {
	out := map[string]string{}
	for _, e := range env {
		if e.ValueFrom == nil {
			out[e.Name] = e.Value
		}
	}
	return out
}

// proxyImage is the image of Istio's gateway deployments.
const proxyImage = "docker.io/istio/proxyv2"

// IstioDNSSecretType is the type of the Secrets istiod's DNS certificate controller
// (Chiron) writes for meshConfig.certificates.
const IstioDNSSecretType corev1.SecretType = "istio.io/dns-key-and-cert"

// Secret keys Istio's credential reader takes (pilot/pkg/credentials/kube): a
// kubernetes.io/tls Secret's, or a generic Secret's.
const (
	tlsCertKey    = "tls.crt"
	tlsKeyKey     = "tls.key"
	tlsCAKey      = "ca.crt"
	genericCert   = "cert"
	genericKey    = "key"
	genericCACert = "cacert"
)

// validateSecret checks a Secret as a gateway's credential and returns its model form:
// a kubernetes.io/tls Secret (tls.crt, tls.key, optional ca.crt) or a generic one
// (cert and key, and/or cacert), every value PEM that parses, the key matching the
// certificate. Other Secret types are refused by name.
func validateSecret(s *corev1.Secret, origin model.Origin, p problems) *model.Secret {
	n := len(*p.list)
	// A Secret's name is a DNS subdomain, as the API server validates it (dots allowed:
	// the DNS certificates page's dns.example1-service-account).
	if msgs := validation.IsDNS1123Subdomain(s.Name); len(msgs) > 0 {
		p.addf("metadata.name", "%q: %s", s.Name, strings.Join(msgs, "; "))
	}
	data := map[string][]byte{}
	for k, v := range s.Data {
		data[k] = v
	}
	for k, v := range s.StringData {
		data[k] = []byte(v)
	}
	out := &model.Secret{Name: s.Name, Namespace: origin.Namespace, Origin: origin}
	certKey, keyKey, caKey := genericCert, genericKey, genericCACert
	switch s.Type {
	case corev1.SecretTypeTLS:
		certKey, keyKey, caKey = tlsCertKey, tlsKeyKey, tlsCAKey
		if data[tlsCertKey] == nil || data[tlsKeyKey] == nil {
			p.addf("data", "a %s Secret needs %s and %s", corev1.SecretTypeTLS, tlsCertKey, tlsKeyKey)
		}
	case corev1.SecretTypeOpaque, "":
		if data[genericCert] == nil && data[tlsCertKey] != nil {
			certKey, keyKey, caKey = tlsCertKey, tlsKeyKey, tlsCAKey
		}
		// A generic Secret without those keys is data, not a credential (a pod's
		// secret volume, as the egress task's nginx-ca-certs): it loads, and a
		// credentialName naming it finds no certificate, so the proxy waits.
		if (data[certKey] == nil) != (data[keyKey] == nil) {
			p.addf("data", "needs both %s and %s, or neither", certKey, keyKey)
		}
	case IstioDNSSecretType:
		// istiod's DNS certificate (meshConfig.certificates, lab/dnscerts.go): data, as
		// a gateway's credentialName finds no cert and key in it.
		return out
	default:
		p.addf("type", "%q is not read by meshlab (a gateway's credentialName names a %s or %s Secret)", s.Type, corev1.SecretTypeTLS, corev1.SecretTypeOpaque)
		return nil
	}
	if c := data[certKey]; c != nil {
		if k := data[keyKey]; k != nil {
			if _, err := tls.X509KeyPair(c, k); err != nil {
				p.addf("data."+certKey, "with %s: %v", keyKey, err)
			}
		}
		out.Cert, out.Key = c, data[keyKey]
	}
	if ca := data[caKey]; ca != nil {
		if msg := checkPEMCertificates(ca); msg != "" {
			p.addf("data."+caKey, "%s", msg)
		}
		out.CACert = ca
	}
	if len(*p.list) != n {
		return nil
	}
	return out
}

// checkPEMCertificates returns why b is not one or more PEM certificates, or "".
func checkPEMCertificates(b []byte) string {
	found := 0
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			return fmt.Sprintf("holds a PEM %s block, want CERTIFICATE", blk.Type)
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			return fmt.Sprintf("parse certificate: %v", err)
		}
		found++
	}
	if found == 0 {
		return "holds no PEM certificate"
	}
	return ""
}

// secretsOf returns the model form of the objects' valid Secrets.
func secretsOf(objs []*Object) []*model.Secret {
	var out []*model.Secret
	for _, o := range objs {
		if o.secret != nil {
			c := *o.secret
			out = append(out, &c)
		}
	}
	return out
}

// validateTLSRoutes checks a VirtualService's tls routes as Istio's validateTLSRoute:
// each has at least one match, each match at least one SNI host that one of the
// VirtualService's hosts covers, and destinations with valid weights. Gateways route
// them on PASSTHROUGH servers, sidecars on their TLS and HTTPS ports (by SNI, as
// istiod's buildSidecarOutboundTLSFilterChainOpts); the match fields meshlab does not
// evaluate (sourceLabels, sourceNamespace, destinationSubnets) are refused by name.
func validateTLSRoutes(vs *networking.VirtualService, p problems) {
	for i, r := range vs.GetTls() {
		f := fmt.Sprintf("spec.tls[%d]", i)
		if len(r.GetMatch()) == 0 {
			p.addf(f+".match", "at least one match is required")
		}
		for j, m := range r.GetMatch() {
			mf := fmt.Sprintf("%s.match[%d]", f, j)
			if len(m.GetSniHosts()) == 0 {
				p.addf(mf+".sniHosts", "at least one SNI host is required")
			}
			for k, h := range m.GetSniHosts() {
				hf := fmt.Sprintf("%s.sniHosts[%d]", mf, k)
				n := len(*p.list)
				checkWildcardHost(h, h, hf, p)
				if len(*p.list) != n {
					continue
				}
				if !slices.ContainsFunc(vs.GetHosts(), func(vh string) bool { return model.HostCovers(vh, h) }) {
					p.addf(hf, "%q is not covered by any of the VirtualService's hosts %v", h, vs.GetHosts())
				}
			}
			if port := m.GetPort(); port != 0 {
				if msg := checkPort(int64(port)); msg != "" {
					p.addf(mf+".port", "%s", msg)
				}
			}
		}
		if len(r.GetRoute()) == 0 {
			p.addf(f+".route", "at least one destination is required")
		}
		weights := make([]int32, len(r.GetRoute()))
		for j, d := range r.GetRoute() {
			checkDestination(d.GetDestination(), fmt.Sprintf("%s.route[%d].destination", f, j), p)
			weights[j] = d.GetWeight()
		}
		checkWeights(weights, f+".route", p)
	}
}
