package e2e

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// nginxManifest is the task's my-nginx as its samples write it: a Service on 443 and a
// Deployment of the nginx image (its Secret and ConfigMap volumes are accepted without
// effect). The port is named https, the SNI-routed form; unnamed, it would be sniffed
// (docs/ARCHITECTURE.md, "Protocol selection").
const nginxManifest = `apiVersion: v1
kind: Service
metadata:
  name: my-nginx
  labels: {run: my-nginx}
spec:
  ports:
  - port: 443
    name: https
    protocol: TCP
  selector: {run: my-nginx}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: my-nginx
spec:
  selector:
    matchLabels: {run: my-nginx}
  replicas: 1
  template:
    metadata:
      labels: {run: my-nginx, sidecar.istio.io/inject: "true"}
    spec:
      containers:
      - name: my-nginx
        image: nginx
        ports:
        - containerPort: 443
        volumeMounts:
        - name: nginx-server-certs
          mountPath: /etc/nginx-server-certs
          readOnly: true
      volumes:
      - name: nginx-server-certs
        secret:
          secretName: nginx-server-certs
`

// passthroughGateway is the task's Gateway (HTTPS on 443, mode PASSTHROUGH) and
// VirtualService (a tls route for SNI nginx.example.com to my-nginx:443).
const passthroughGateway = `apiVersion: networking.istio.io/v1
kind: Gateway
metadata:
  name: mygateway
spec:
  selector:
    istio: ingressgateway
  servers:
  - port:
      number: 443
      name: https
      protocol: HTTPS
    tls:
      mode: PASSTHROUGH
    hosts:
    - nginx.example.com
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: nginx
spec:
  hosts:
  - nginx.example.com
  gateways:
  - mygateway
  tls:
  - match:
    - port: 443
      sniHosts:
      - nginx.example.com
    route:
    - destination:
        host: my-nginx
        port:
          number: 443
`

// TestIngressPassthrough runs Istio's "ingress gateway without TLS termination" task:
// nginx (a TLS server in the mesh, with a sidecar) runs first; the Gateway and
// VirtualService applied to the running lab bring the ingress gateway's pod; from the
// host, through `meshlab port-forward ... :443`, a TLS client asking for
// nginx.example.com gets nginx's welcome page and sees nginx's own certificate (the
// gateway holds none: it routes the untouched TLS by SNI, over mTLS to the sidecar),
// while a server name no tls route lists gets no TLS at all.
func TestIngressPassthrough(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, writeTemp(t, "nginx.yaml", nginxManifest))
	if out, err := meshlab(t, "apply", "--wait", "--name", l.name, "-f", writeTemp(t, "gateway.yaml", passthroughGateway)); err != nil {
		t.Fatalf("apply Gateway: %v\n%s", err, out)
	}
	if out, err := meshlab(t, "get", "pods", "--name", l.name, "-n", "istio-system"); err != nil || !strings.Contains(out, "istio-ingressgateway-") {
		t.Fatalf("the Gateway brought no ingress gateway pod: %v\n%s", err, out)
	}
	// kubectl's -A lists every namespace, and wins over -n.
	if out, err := meshlab(t, "get", "pods", "--name", l.name, "-n", "default", "-A"); err != nil || !strings.Contains(out, "istio-ingressgateway-") || !strings.Contains(out, "nginx") {
		t.Errorf("get pods -A does not list both namespaces' pods: %v\n%s", err, out)
	}
	addr := portForward(t, l.name, "443")

	nginxPassthrough(t, addr)
}

// nginxPassthrough checks TLS passthrough to my-nginx through a gateway at addr: the
// task's curl --resolve nginx.example.com:443:$INGRESS_HOST https://nginx.example.com
// (polled until nginx's welcome page, with nginx's own certificate), and a server name
// no route lists getting no TLS at all.
func nginxPassthrough(t *testing.T, addr string) {
	t.Helper()
	get := func(sni string) (int, string, *tls.ConnectionState, error) {
		dialer := &net.Dialer{Timeout: 10 * time.Second}
		conn, err := tls.DialWithDialer(dialer, "tcp", addr, &tls.Config{
			ServerName: sni, InsecureSkipVerify: true, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}, //nolint:gosec // the test reads the certificate the backend presents
		})
		if err != nil {
			return 0, "", nil, err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(15 * time.Second))
		fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", sni)
		b, _ := io.ReadAll(conn)
		st := conn.ConnectionState()
		resp := string(b)
		code := 0
		if _, err := fmt.Sscanf(resp, "HTTP/1.1 %d", &code); err != nil {
			return 0, resp, &st, fmt.Errorf("no HTTP status in %.200q", resp)
		}
		return code, resp, &st, nil
	}
	deadline := time.Now().Add(45 * time.Second)
	for {
		code, body, st, err := get("nginx.example.com")
		if err == nil && code == 200 && strings.Contains(body, "<title>Welcome to nginx!</title>") {
			leaf := st.PeerCertificates[0]
			if leaf.Subject.CommonName != "nginx.example.com" || len(leaf.Issuer.Organization) == 0 || leaf.Issuer.Organization[0] != "meshlab nginx persona" {
				t.Errorf("certificate seen by the client: subject %s, issuer %s; want nginx's own", leaf.Subject, leaf.Issuer)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("https://nginx.example.com through the gateway: not within 45s; last: %d %v %.300s", code, err, body)
		}
		time.Sleep(300 * time.Millisecond)
	}
	// No tls route lists other.example.com: the gateway has no chain for it and closes
	// the connection before any TLS answer.
	if _, _, st, err := get("other.example.com"); err == nil {
		t.Errorf("SNI other.example.com got a TLS answer from %s, want none", st.PeerCertificates[0].Subject)
	}
}
