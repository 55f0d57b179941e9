package lab

import "context"

// Istio's plugged-in CA: the Secret cacerts in istio-system, whose ca-cert.pem,
// ca-key.pem, cert-chain.pem and root-cert.pem istiod mounts at /etc/cacerts and signs
// with (tasks/security/cert-management/plugin-ca-cert).
const (
	caCertsSecret    = "cacerts"
	caCertsNamespace = "istio-system"
)

// EventCACertsRefused is a cacerts Secret the CA could not sign with.
const EventCACertsRefused = "ca.cacerts-refused"

// plugCACerts has the lab's CA sign with the cacerts Secret of istio-system once the
// lab holds one, and again when it changes (lab/caops PlugIn: every agent renews). A
// lab's control plane runs from the start, so the Secret is taken when it is applied,
// where istiod reads it when it starts (the docs create it before istioctl install)
// and again when its mounted files change. A Secret the CA cannot sign with is logged
// and published, and the CA keeps signing as it did, as istiod keeps running with the
// CA it loaded; the Secret itself stays stored, as Kubernetes stores it. Deleting the
// Secret leaves the CA as it is, as a running istiod keeps its CA.
func (l *Lab) plugCACerts(ctx context.Context) {
	if l.ca == nil {
		return
	}
	l.mu.Lock()
	sc := l.scenario
	l.mu.Unlock()
	if sc == nil {
		return
	}
	objs, err := sc.Find("Secret", caCertsSecret)
	if err != nil {
		return
	}
	for _, o := range objs {
		if o.Origin.Namespace != caCertsNamespace || o.Secret == nil {
			continue
		}
		files := map[string][]byte{}
		for k, v := range o.Secret.Data {
			files[k] = v
		}
		for k, v := range o.Secret.StringData {
			files[k] = []byte(v)
		}
		if err := l.ca.PlugIn(ctx, files); err != nil {
			l.log.Error("the CA does not sign with the cacerts Secret", "secret", caCertsNamespace+"/"+caCertsSecret, "err", err)
			l.publish(EventCACertsRefused, "", "secret "+caCertsNamespace+"/"+caCertsSecret+": "+err.Error(), map[string]any{"error": err.Error()})
		}
	}
}
