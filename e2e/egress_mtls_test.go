package e2e

import (
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// egressTaskCerts makes the certificates of "Egress Gateways with TLS Origination"
// with openssl, as the task's commands do: example.com (root), the nginx server's
// my-nginx.mesh-external.svc.cluster.local and client.example.com, both signed by it,
// with a subject and no extensions.
func egressTaskCerts(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("openssl is not installed; the task makes its certificates with it")
		}
		t.Skip("openssl is not installed; the task makes its certificates with it")
	}
	dir := t.TempDir()
	for _, cmd := range []string{
		"req -x509 -sha256 -nodes -days 365 -newkey rsa:2048 -subj /O=example_Inc./CN=example.com -keyout example.com.key -out example.com.crt",
		"req -out my-nginx.mesh-external.svc.cluster.local.csr -newkey rsa:2048 -nodes -keyout my-nginx.mesh-external.svc.cluster.local.key -subj /CN=my-nginx.mesh-external.svc.cluster.local/O=some_organization",
		"x509 -req -days 365 -CA example.com.crt -CAkey example.com.key -set_serial 0 -in my-nginx.mesh-external.svc.cluster.local.csr -out my-nginx.mesh-external.svc.cluster.local.crt",
		"req -out client.example.com.csr -newkey rsa:2048 -nodes -keyout client.example.com.key -subj /CN=client.example.com/O=client_organization",
		"x509 -req -days 365 -CA example.com.crt -CAkey example.com.key -set_serial 1 -in client.example.com.csr -out client.example.com.crt",
	} {
		c := exec.Command("openssl", strings.Fields(cmd)...)
		c.Dir = dir
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("openssl %s: %v\n%s", cmd, err, out)
		}
	}
	return dir
}

// The task's nginx.conf: TLS with the server's certificate, client certificates
// required and verified against example.com.
const egressNginxConf = `events {
}

http {
  log_format main '$remote_addr - $remote_user [$time_local]  $status '
  '"$request" $body_bytes_sent "$http_referer" '
  '"$http_user_agent" "$http_x_forwarded_for"';
  access_log /var/log/nginx/access.log main;
  error_log  /var/log/nginx/error.log;

  server {
    listen 443 ssl;

    root /usr/share/nginx/html;
    index index.html;

    server_name my-nginx.mesh-external.svc.cluster.local;
    ssl_certificate /etc/nginx-server-certs/tls.crt;
    ssl_certificate_key /etc/nginx-server-certs/tls.key;
    ssl_client_certificate /etc/nginx-ca-certs/example.com.crt;
    ssl_verify_client on;
  }
}
`

// "Deploy a mutual TLS server": the namespace, the server's secrets, the nginx.conf
// ConfigMap (`kubectl create configmap --from-file`), and the task's Service and
// Deployment (unnamed TCP port 443, the image nginx, its three volumes).
const egressNginxYAML = `apiVersion: v1
kind: Namespace
metadata:
  name: mesh-external
---
apiVersion: v1
kind: Service
metadata:
  name: my-nginx
  namespace: mesh-external
  labels:
    run: my-nginx
spec:
  ports:
  - port: 443
    protocol: TCP
  selector:
    run: my-nginx
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: my-nginx
  namespace: mesh-external
spec:
  selector:
    matchLabels:
      run: my-nginx
  replicas: 1
  template:
    metadata:
      labels:
        run: my-nginx
    spec:
      containers:
      - name: my-nginx
        image: nginx
        ports:
        - containerPort: 443
        volumeMounts:
        - name: nginx-config
          mountPath: /etc/nginx
          readOnly: true
        - name: nginx-server-certs
          mountPath: /etc/nginx-server-certs
          readOnly: true
        - name: nginx-ca-certs
          mountPath: /etc/nginx-ca-certs
          readOnly: true
      volumes:
      - name: nginx-config
        configMap:
          name: nginx-configmap
      - name: nginx-server-certs
        secret:
          secretName: nginx-server-certs
      - name: nginx-ca-certs
        secret:
          secretName: nginx-ca-certs
`

// "Configure mutual TLS origination for egress traffic", as the task writes it.
const (
	egressMTLSGatewayYAML = `apiVersion: networking.istio.io/v1
kind: Gateway
metadata:
  name: istio-egressgateway
spec:
  selector:
    istio: egressgateway
  servers:
  - port:
      number: 443
      name: https
      protocol: HTTPS
    hosts:
    - my-nginx.mesh-external.svc.cluster.local
    tls:
      mode: ISTIO_MUTUAL
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: egressgateway-for-nginx
spec:
  host: istio-egressgateway.istio-system.svc.cluster.local
  subsets:
  - name: nginx
    trafficPolicy:
      loadBalancer:
        simple: ROUND_ROBIN
      portLevelSettings:
      - port:
          number: 443
        tls:
          mode: ISTIO_MUTUAL
          sni: my-nginx.mesh-external.svc.cluster.local
`
	egressMTLSVirtualServiceYAML = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: direct-nginx-through-egress-gateway
spec:
  hosts:
  - my-nginx.mesh-external.svc.cluster.local
  gateways:
  - istio-egressgateway
  - mesh
  http:
  - match:
    - gateways:
      - mesh
      port: 80
    route:
    - destination:
        host: istio-egressgateway.istio-system.svc.cluster.local
        subset: nginx
        port:
          number: 443
      weight: 100
  - match:
    - gateways:
      - istio-egressgateway
      port: 443
    route:
    - destination:
        host: my-nginx.mesh-external.svc.cluster.local
        port:
          number: 443
      weight: 100
`
	// Applied with `kubectl apply -n istio-system`.
	egressMTLSOriginationYAML = `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: originate-mtls-for-nginx
  namespace: istio-system
spec:
  host: my-nginx.mesh-external.svc.cluster.local
  trafficPolicy:
    loadBalancer:
      simple: ROUND_ROBIN
    portLevelSettings:
    - port:
        number: 443
      tls:
        mode: MUTUAL
        credentialName: client-credential # this must match the secret created earlier to hold client certs
        sni: my-nginx.mesh-external.svc.cluster.local
`
)

// TestEgressMutualTLSOriginationTask runs the mutual TLS part of Istio's "Egress
// Gateways with TLS Origination": certificates from openssl as the task makes them;
// an nginx in mesh-external (no sidecar) that requires client certificates, configured
// by the task's nginx.conf ConfigMap and Secret volumes; the client credential in
// istio-system; the egress gateway's ISTIO_MUTUAL server; the sidecar's plain HTTP to
// my-nginx sent to the gateway, which originates MUTUAL TLS with the credential. Then
// curl gets nginx's welcome page and the gateway's access log shows the request; with
// a credential of another CA nginx answers 400 "The SSL certificate error". Then the
// curl sidecar itself originates MUTUAL with a credential of its namespace.
func TestEgressMutualTLSOriginationTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	certs := egressTaskCerts(t)
	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(certs, name))
		if err != nil {
			t.Fatal(err)
		}
		return base64.StdEncoding.EncodeToString(b)
	}
	l := startLab(t, "testdata/egress-world.yaml")

	// Deploy a mutual TLS server (kubectl create secret tls / generic, configmap).
	server := fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: nginx-server-certs, namespace: mesh-external}
type: kubernetes.io/tls
data: {tls.crt: %s, tls.key: %s}
---
apiVersion: v1
kind: Secret
metadata: {name: nginx-ca-certs, namespace: mesh-external}
type: Opaque
data: {example.com.crt: %s}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: nginx-configmap, namespace: mesh-external}
data:
  nginx.conf: |
%s`, read("my-nginx.mesh-external.svc.cluster.local.crt"), read("my-nginx.mesh-external.svc.cluster.local.key"),
		read("example.com.crt"), indent(egressNginxConf, "    "))
	applyYAML(t, l.name, server+"---\n"+egressNginxYAML)

	// Configure mutual TLS origination for egress traffic.
	credential := func(dir string) string {
		b := func(name string) string {
			d, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			return base64.StdEncoding.EncodeToString(d)
		}
		return fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: client-credential, namespace: istio-system}
type: Opaque
data: {tls.key: %s, tls.crt: %s, ca.crt: %s}
`, b("client.example.com.key"), b("client.example.com.crt"), b("example.com.crt"))
	}
	applyYAML(t, l.name, credential(certs))
	applyYAML(t, l.name, egressMTLSGatewayYAML)
	applyYAML(t, l.name, egressMTLSVirtualServiceYAML)
	applyYAML(t, l.name, egressMTLSOriginationYAML)

	r := eventually(t, l.name, "nginx's welcome page", statusLine("<title>Welcome to nginx!</title>"),
		"-sS", "http://my-nginx.mesh-external.svc.cluster.local")
	if !strings.HasPrefix(r.out, "<!DOCTYPE html>") {
		t.Errorf("curl http://my-nginx.mesh-external.svc.cluster.local:\n%s\nwant the page as the task shows it", r.out)
	}
	// kubectl logs -l istio=egressgateway -n istio-system | grep my-nginx... | grep HTTP
	deadline := time.Now().Add(15 * time.Second)
	for {
		logs, err := meshlab(t, "logs", "--name", l.name, "-n", "istio-system", "deploy/istio-egressgateway") // no -c: its one container, as kubectl logs
		if err == nil && strings.Contains(logs, `"GET / HTTP/1.1" 200`) && strings.Contains(logs, "outbound|443||my-nginx.mesh-external.svc.cluster.local") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("egress gateway log (err %v):\n%s\nwant the GET / 200 to outbound|443||my-nginx.mesh-external.svc.cluster.local", err, logs)
		}
		time.Sleep(300 * time.Millisecond)
	}

	// A client certificate nginx's CA did not sign: nginx refuses it with its 400. The
	// rule names a second credential (the gateway's pooled connections were made with
	// the first), which keeps the task's CA to verify nginx.
	other := egressTaskCerts(t)
	otherCred := strings.Replace(credential(other), "name: client-credential,", "name: other-credential,", 1)
	otherCred = otherCred[:strings.Index(otherCred, "ca.crt: ")] + "ca.crt: " + read("example.com.crt") + "}\n"
	applyYAML(t, l.name, otherCred+"---\n"+strings.Replace(egressMTLSOriginationYAML, "credentialName: client-credential", "credentialName: other-credential", 1))
	eventually(t, l.name, "nginx's 400 for a client certificate of another CA", statusLine("The SSL certificate error"),
		"-sS", "http://my-nginx.mesh-external.svc.cluster.local")

	// A sidecar originates MUTUAL too. The rule of istio-system names a credential the
	// default namespace lacks, so the curl sidecar's my-nginx:443 has no TLS (as
	// istiod's sidecars): nginx gets plaintext on its TLS port. With the credential and
	// a rule in default (the proxy's namespace wins), plain HTTP from curl to port 443
	// leaves the sidecar as mutual TLS and nginx answers.
	if r := curlIn(t, l.name, "-sS", "http://my-nginx.mesh-external.svc.cluster.local:443/"); strings.Contains(r.out, "Welcome to nginx!") {
		t.Errorf("plain HTTP to my-nginx:443 without a credential in default reached nginx:\n%s", r.out)
	}
	sidecarCred := strings.Replace(credential(certs), "namespace: istio-system", "namespace: default", 1)
	sidecarRule := strings.Replace(strings.Replace(egressMTLSOriginationYAML, "namespace: istio-system", "namespace: default", 1),
		"name: originate-mtls-for-nginx", "name: originate-mtls-in-sidecar", 1)
	applyYAML(t, l.name, sidecarCred+"---\n"+sidecarRule)
	eventually(t, l.name, "nginx's welcome page through the sidecar's mutual TLS", statusLine("<title>Welcome to nginx!</title>"),
		"-sS", "http://my-nginx.mesh-external.svc.cluster.local:443/")
}

// indent prefixes every line of s with p.
func indent(s, p string) string {
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = p + l
		}
	}
	return strings.Join(lines, "")
}
