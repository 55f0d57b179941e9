package config

import (
	"strings"
	"testing"

	"github.com/meshlab/meshlab/controlplane/model"
)

// The mutual TLS nginx of Istio's egress TLS origination task: its container mounts a
// ConfigMap (nginx.conf) and two Secrets (the server's tls Secret, the CA a generic
// Secret holds under the file's name); the pod gets those files at the container's
// paths. A volume whose object is missing gives no file; items and subPath pick keys.
func TestVolumeFiles(t *testing.T) {
	const nginx = `apiVersion: v1
kind: Namespace
metadata: {name: mesh-external}
---
apiVersion: v1
kind: Secret
metadata: {name: nginx-server-certs, namespace: mesh-external}
type: Opaque
stringData: {tls.crt: "", tls.key: ""}
---
apiVersion: v1
kind: Secret
metadata: {name: nginx-ca-certs, namespace: mesh-external}
stringData: {example.com.crt: "CA"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: nginx-configmap, namespace: mesh-external}
data: {nginx.conf: "events {}", other.conf: "x"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: my-nginx, namespace: mesh-external}
spec:
  selector: {matchLabels: {run: my-nginx}}
  template:
    metadata: {labels: {run: my-nginx}}
    spec:
      containers:
      - name: my-nginx
        image: nginx
        ports: [{containerPort: 443}]
        volumeMounts:
        - {name: nginx-config, mountPath: /etc/nginx, readOnly: true}
        - {name: nginx-server-certs, mountPath: /etc/nginx-server-certs, readOnly: true}
        - {name: nginx-ca-certs, mountPath: /etc/nginx-ca-certs, readOnly: true}
        - {name: one, mountPath: /etc/one.conf, subPath: other.conf}
        - {name: missing, mountPath: /etc/missing}
      volumes:
      - {name: nginx-config, configMap: {name: nginx-configmap, items: [{key: nginx.conf, path: nginx.conf}]}}
      - {name: nginx-server-certs, secret: {secretName: nginx-server-certs}}
      - {name: nginx-ca-certs, secret: {secretName: nginx-ca-certs}}
      - {name: one, configMap: {name: nginx-configmap}}
      - {name: missing, secret: {secretName: nope}}
`
	// The server's Secret needs real PEM to load; its content is not what is tested.
	m := buildModel(t, strings.Replace(nginx, `stringData: {tls.crt: "", tls.key: ""}`, "stringData: {a: b}", 1))
	var pod *model.Pod
	for _, p := range m.Pods {
		if p.Workload == "my-nginx" {
			pod = p
		}
	}
	if pod == nil {
		t.Fatal("no my-nginx pod")
	}
	var got []string
	for _, f := range pod.App.Files {
		got = append(got, f.Path+"="+string(f.Data))
	}
	want := []string{"/etc/nginx-ca-certs/example.com.crt=CA", "/etc/nginx-server-certs/a=b", "/etc/nginx/nginx.conf=events {}", "/etc/one.conf=x"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("files %q, want %q", got, want)
	}
	if pod.Sidecar.Inject {
		t.Error("the pod of mesh-external (a Namespace without injection labels) got a sidecar")
	}
}
