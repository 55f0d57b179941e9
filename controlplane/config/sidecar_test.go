package config

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/meshlab/meshlab/controlplane/model"
)

// The sidecar TLS termination task's Sidecar, as the page writes it.
const taskSidecar = `apiVersion: networking.istio.io/v1alpha3
kind: Sidecar
metadata:
  name: ingress-sidecar
  namespace: test
spec:
  workloadSelector:
    labels:
      app: httpbin
      version: v1
  ingress:
  - port:
      number: 9080
      protocol: HTTPS
      name: external
    defaultEndpoint: 0.0.0.0:80
    tls:
      mode: MUTUAL
      privateKey: "/etc/istio/tls-certs/tls.key"
      serverCertificate: "/etc/istio/tls-certs/tls.crt"
      caCertificates: "/etc/istio/tls-ca-certs/ca.crt"
  - port:
      number: 9081
      protocol: HTTP
      name: internal
    defaultEndpoint: 0.0.0.0:80
`

// TestSidecarLoads: the task's Sidecar loads into the model as written.
func TestSidecarLoads(t *testing.T) {
	t.Parallel()
	s, err := Load("t.yaml", []byte(taskSidecar))
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.Build(defaultOpts)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Istio.Sidecars) != 1 || m.Istio.Sidecars[0].Name != "ingress-sidecar" || len(m.Istio.Sidecars[0].Spec.GetIngress()) != 2 {
		t.Fatalf("model Sidecars = %v", m.Istio.Sidecars)
	}
}

// TestSidecarRefusals: what istiod's validation rejects, with its words, and what meshlab
// does not build, by name; nothing loads.
func TestSidecarRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, from, to, want string
	}{
		{"credentialName", `caCertificates: "/etc/istio/tls-ca-certs/ca.crt"`, `credentialName: httpbin`, "spec.ingress[0].tls.credentialName: sidecar: credentialName is not currently supported"},
		{"ISTIO_MUTUAL", "mode: MUTUAL", "mode: ISTIO_MUTUAL", "cannot set mode to ISTIO_MUTUAL in sidecar ingress tls"},
		{"tls on HTTP", "protocol: HTTPS", "protocol: HTTP", "server cannot have TLS settings for non HTTPS/TLS ports"},
		{"bad endpoint", "defaultEndpoint: 0.0.0.0:80\n    tls", "defaultEndpoint: 10.0.0.1:80\n    tls", "defaultEndpoint must be of form 127.0.0.1:<port>"},
		{"unix endpoint", "defaultEndpoint: 0.0.0.0:80\n    tls", "defaultEndpoint: unix:///var/run/app.sock\n    tls", "meshlab's apps listen on TCP"},
		{"duplicate port", "number: 9081", "number: 9080", "sidecar: ports on IP bound listeners must be unique"},
		{"relative file", `privateKey: "/etc/istio/tls-certs/tls.key"`, `privateKey: "tls.key"`, `spec.ingress[0].tls.privateKey: "tls.key": an absolute path`},
		{"egress", "  ingress:\n", "  egress:\n  - hosts: [\"./*\"]\n  ingress:\n", "spec.egress"},
		{"bind", "    defaultEndpoint: 0.0.0.0:80\n    tls", "    bind: 10.0.0.1\n    defaultEndpoint: 0.0.0.0:80\n    tls", "spec.ingress[0].bind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			doc := strings.Replace(taskSidecar, tc.from, tc.to, 1)
			if doc == taskSidecar {
				t.Fatalf("case does not change the Sidecar (%q not found)", tc.from)
			}
			_, err := Load("t.yaml", []byte(doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestSidecarUserVolumes: the task's user volume annotations give the sidecar the
// Secrets' files at their mount paths; a malformed one, or a mount of no volume, is
// refused naming the annotation.
func TestSidecarUserVolumes(t *testing.T) {
	t.Parallel()
	vols, mounts, err := sidecarUserVolumes(map[string]string{
		userVolumeAnnotation:      `{"tls-secret":{"secret":{"secretName":"httpbin-mtls-termination","optional":true}},"tls-ca-secret":{"secret":{"secretName":"httpbin-mtls-termination-cacert"}}}`,
		userVolumeMountAnnotation: `{"tls-secret":{"mountPath":"/etc/istio/tls-certs/","readOnly":true},"tls-ca-secret":{"mountPath":"/etc/istio/tls-ca-certs/","readOnly":true}}`,
	}, nil)
	if err != nil || len(vols) != 2 || len(mounts) != 2 || vols[1].Name != "tls-secret" || vols[1].Secret.SecretName != "httpbin-mtls-termination" || mounts[0].MountPath != "/etc/istio/tls-ca-certs/" {
		t.Fatalf("sidecarUserVolumes = %+v, %+v, %v", vols, mounts, err)
	}
	for _, tc := range []struct{ vol, mount, want string }{
		{`{"a":`, `{}`, "sidecar.istio.io/userVolume: a JSON object"},
		{`{}`, `{"a":{"mountPath":"/x"}}`, `sidecar.istio.io/userVolumeMount[a]: no volume "a"`},
		{`{"a":{"emptyDir":{}}}`, `{"a":{"mountPath":"x"}}`, `sidecar.istio.io/userVolumeMount[a].mountPath: "x" is not an absolute path`},
	} {
		if _, _, err := sidecarUserVolumes(map[string]string{userVolumeAnnotation: tc.vol, userVolumeMountAnnotation: tc.mount}, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("sidecarUserVolumes(%s, %s) = %v, want %q", tc.vol, tc.mount, err, tc.want)
		}
	}
}

// TestSidecarUserVolumesArrayForm: the array form of prometheus-secure-metrics.yaml
// mounts a volume of the pod itself, each element naming its volume; an element without
// a name takes its index, as the injection template's `name: "<index>"` gives it.
func TestSidecarUserVolumesArrayForm(t *testing.T) {
	t.Parallel()
	pod := []corev1.Volume{{Name: "istio-certs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	vols, mounts, err := sidecarUserVolumes(map[string]string{
		userVolumeMountAnnotation: `[{"name": "istio-certs", "mountPath": "/etc/istio-certs"}]`,
	}, pod)
	if err != nil || len(vols) != 0 || len(mounts) != 1 || mounts[0].Name != "istio-certs" || mounts[0].MountPath != "/etc/istio-certs" {
		t.Fatalf("sidecarUserVolumes = %+v, %+v, %v", vols, mounts, err)
	}
	if got := emptyDirMounts(pod, mounts); len(got) != 1 || got[0] != (model.EmptyDir{Volume: "istio-certs", Path: "/etc/istio-certs"}) {
		t.Fatalf("emptyDirMounts = %+v", got)
	}
	vols, mounts, err = sidecarUserVolumes(map[string]string{
		userVolumeAnnotation:      `[{"emptyDir": {}}]`,
		userVolumeMountAnnotation: `[{"name": "0", "mountPath": "/scratch"}]`,
	}, nil)
	if err != nil || len(vols) != 1 || vols[0].Name != "0" || vols[0].EmptyDir == nil || len(mounts) != 1 {
		t.Fatalf("unnamed element: sidecarUserVolumes = %+v, %+v, %v", vols, mounts, err)
	}
	for _, tc := range []struct{ mount, want string }{
		{`[{"name": "other", "mountPath": "/x"}]`, `sidecar.istio.io/userVolumeMount[other]: no volume "other" in sidecar.istio.io/userVolume or the pod's spec.volumes`},
		{`[{"name": "istio-certs", "mountPath": 3}]`, `sidecar.istio.io/userVolumeMount: a JSON object of volume name to volume mount, or an array of volume mounts: sidecar.istio.io/userVolumeMount[0]: json: cannot unmarshal number`},
		{`"istio-certs"`, `sidecar.istio.io/userVolumeMount: a JSON object of volume name to volume mount, or an array`},
	} {
		if _, _, err := sidecarUserVolumes(map[string]string{userVolumeMountAnnotation: tc.mount}, pod); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("sidecarUserVolumes(%s) = %v, want %q", tc.mount, err, tc.want)
		}
	}
}
