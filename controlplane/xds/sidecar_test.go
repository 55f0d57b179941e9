package xds

import (
	"strings"
	"testing"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// TestSidecarIngressTLSNeedsTheFlag: without ENABLE_TLS_ON_SIDECAR_INGRESS istiod ignores
// an ingress tls, and so does the generator: the port keeps the mesh's chains (plaintext
// under DISABLE) and its HTTPS protocol (TLS passed through to the app), no file secret
// is named. With it, the DISABLE port terminates TLS with the listener's files.
func TestSidecarIngressTLSNeedsTheFlag(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{false, true} {
		m := istioModel()
		m.Mesh.TLSOnSidecarIngress = on
		m.Istio.PeerAuthentications = append(m.Istio.PeerAuthentications, pa("default", "reviews", map[string]string{"app": "reviews"}, MTLSDisable, nil))
		m.Istio.Sidecars = append(m.Istio.Sidecars, &model.IstioConfig[*networking.Sidecar]{Name: "ingress-sidecar", Namespace: "default", Spec: &networking.Sidecar{
			WorkloadSelector: &networking.WorkloadSelector{Labels: map[string]string{"app": "reviews"}},
			Ingress: []*networking.IstioIngressListener{{
				Port:            &networking.SidecarPort{Number: 9080, Protocol: "HTTPS", Name: "external"},
				DefaultEndpoint: "127.0.0.1:80",
				Tls: &networking.ServerTLSSettings{Mode: networking.ServerTLSSettings_SIMPLE,
					PrivateKey: "/etc/certs/tls.key", ServerCertificate: "/etc/certs/tls.crt"},
			}},
		}})
		got := string(dumpJSON(t, generate(t, m, "reviews-v1")))
		has := strings.Contains(got, "file-cert:/etc/certs/tls.crt~/etc/certs/tls.key")
		if has != on {
			t.Errorf("ENABLE_TLS_ON_SIDECAR_INGRESS=%v: file-cert secret named = %v", on, has)
		}
		if !strings.Contains(got, `"name": "inbound|9080||"`) {
			t.Errorf("ENABLE_TLS_ON_SIDECAR_INGRESS=%v: no inbound|9080|| cluster", on)
		}
	}
}
