package e2e

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// taskCerts makes the certificates of Istio's Secure Gateways task with openssl, as
// the task does: a root example.com, a server certificate for host signed by it, and
// a client certificate client.example.com signed by it. It returns the directory
// holding example.com.crt, <host>.crt/.key and client.example.com.crt/.key.
func taskCerts(t *testing.T, host string) string {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("openssl is not installed; the task makes its certificates with it")
		}
		t.Skip("openssl is not installed; the task makes its certificates with it")
	}
	dir := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("openssl", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("openssl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("req", "-x509", "-sha256", "-nodes", "-days", "365", "-newkey", "rsa:2048", "-subj", "/O=example Inc./CN=example.com",
		"-keyout", "example.com.key", "-out", "example.com.crt")
	for _, leaf := range []struct{ name, org, ext string }{
		{host, "httpbin organization", "subjectAltName=DNS:" + host},
		{"client.example.com", "client organization", "subjectAltName=DNS:client.example.com"},
	} {
		run("req", "-out", leaf.name+".csr", "-newkey", "rsa:2048", "-nodes", "-keyout", leaf.name+".key",
			"-subj", "/CN="+leaf.name+"/O="+leaf.org)
		ext := filepath.Join(dir, leaf.name+".ext")
		if err := os.WriteFile(ext, []byte(leaf.ext+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		run("x509", "-req", "-sha256", "-days", "365", "-CA", "example.com.crt", "-CAkey", "example.com.key", "-set_serial", "0",
			"-in", leaf.name+".csr", "-out", leaf.name+".crt", "-extfile", ext)
	}
	return dir
}

// secretFromFiles is `kubectl create -n ns secret generic name --from-file=key=path ...`
// (typ "" for generic, or kubernetes.io/tls for `secret tls`) as YAML.
func secretFromFiles(t *testing.T, ns, name, typ string, files map[string]string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Secret\nmetadata: {name: %s, namespace: %s}\n", name, ns)
	if typ != "" {
		fmt.Fprintf(&b, "type: %s\n", typ)
	}
	b.WriteString("data:\n")
	for _, k := range []string{"tls.crt", "tls.key", "ca.crt"} {
		if p, ok := files[k]; ok {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "  %s: %s\n", k, base64.StdEncoding.EncodeToString(data))
		}
	}
	return b.String()
}

// hostCurl runs curl on the host, as the task's reader does, and returns its output
// and exit code.
func hostCurl(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, err := exec.Command("curl", append([]string{"--max-time", "10"}, args...)...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	case err != nil:
		t.Fatalf("curl %v: %v", args, err)
	}
	return string(out), 0
}

// The Secure Gateways task's Gateway and VirtualService for httpbin.example.com, as the
// page writes them (docs_gateways_test.go).
const secureGatewayYAML = docsMyGateway + "---\n" + docsMyGatewayVirtualService

// TestSecureIngressMutualTask runs Istio's "Secure Gateways" task from the host as its
// reader does: certificates made with openssl, the secrets `kubectl create -n
// istio-system secret` makes, the gateway reached through `meshlab port-forward` and
// curl's --resolve. A SIMPLE gateway answers the teapot to --cacert alone; "Configure a
// mutual TLS ingress gateway" replaces the secret with a generic one holding ca.crt and
// the server's mode with MUTUAL: curl without a client certificate fails the
// handshake, with --cert/--key it gets the teapot.
func TestSecureIngressMutualTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed on the host")
	}
	certs := taskCerts(t, "httpbin.example.com")
	f := func(name string) string { return filepath.Join(certs, name) }
	l := startLab(t, "testdata/secure-ingress-httpbin.yaml")

	// Configure a TLS ingress gateway for a single host.
	meshlabSays(t, "secret/httpbin-credential created", "create", "--name", l.name, "-n", "istio-system", "secret", "tls", "httpbin-credential",
		"--key="+f("httpbin.example.com.key"), "--cert="+f("httpbin.example.com.crt"))
	applyYAML(t, l.name, secureGatewayYAML)
	addr := portForward(t, l.name, "443")
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	url := "https://httpbin.example.com:" + port + "/status/418"
	resolve := "httpbin.example.com:" + port + ":127.0.0.1"
	teapot := func(args ...string) (string, int, bool) {
		out, code := hostCurl(t, append([]string{"-sS", "-HHost:httpbin.example.com", "--resolve", resolve}, args...)...)
		return out, code, code == 0 && strings.Contains(out, "I'm a teapot!")
	}
	waitTeapot := func(what string, args ...string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			out, code, ok := teapot(args...)
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: curl exit %d\n%s\nwant httpbin's teapot", what, code, out)
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	waitTeapot("SIMPLE: curl --cacert example.com.crt", "--cacert", f("example.com.crt"), url)

	// Configure a mutual TLS ingress gateway: the secret now holds the CA that
	// verifies clients, and the server asks for a client certificate.
	meshlabSays(t, `secret "httpbin-credential" deleted`, "delete", "--name", l.name, "-n", "istio-system", "secret", "httpbin-credential")
	meshlabSays(t, "secret/httpbin-credential created", "create", "--name", l.name, "-n", "istio-system", "secret", "generic", "httpbin-credential",
		"--from-file=tls.key="+f("httpbin.example.com.key"), "--from-file=tls.crt="+f("httpbin.example.com.crt"), "--from-file=ca.crt="+f("example.com.crt"))
	applyYAML(t, l.name, strings.Replace(secureGatewayYAML, "mode: SIMPLE", "mode: MUTUAL", 1))
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, code, ok := teapot("--cacert", f("example.com.crt"), url)
		if !ok && code != 0 {
			t.Logf("without a client certificate: curl exit %d: %s", code, strings.TrimSpace(out))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("MUTUAL without a client certificate: curl exit %d\n%s\nwant the handshake refused", code, out)
		}
		time.Sleep(300 * time.Millisecond)
	}
	waitTeapot("MUTUAL: curl --cacert --cert --key", "--cacert", f("example.com.crt"),
		"--cert", f("client.example.com.crt"), "--key", f("client.example.com.key"), url)
	// Now that MUTUAL is in place for sure, without a certificate is still refused.
	if out, code, ok := teapot("--cacert", f("example.com.crt"), url); ok || code == 0 {
		t.Errorf("MUTUAL without a client certificate: curl exit %d\n%s\nwant the handshake refused", code, out)
	}
	// A client certificate from another CA is refused too.
	other := taskCerts(t, "httpbin.example.com")
	if out, code, ok := teapot("--cacert", f("example.com.crt"), "--cert", filepath.Join(other, "client.example.com.crt"),
		"--key", filepath.Join(other, "client.example.com.key"), url); ok || code == 0 {
		t.Errorf("a client certificate of another CA: curl exit %d\n%s\nwant the handshake refused", code, out)
	}
}

// The Secure Gateways task's Gateway API form: an HTTPS listener terminating TLS with
// the Secret httpbin-credential, admitting the routes of namespace default by label.
const secureGatewayAPIYAML = `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: mygateway
  namespace: istio-system
spec:
  gatewayClassName: istio
  listeners:
  - name: https
    hostname: "httpbin.example.com"
    port: 443
    protocol: HTTPS
    tls:
      mode: Terminate
      certificateRefs:
      - name: httpbin-credential
    allowedRoutes:
      namespaces:
        from: Selector
        selector:
          matchLabels:
            kubernetes.io/metadata.name: default
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: httpbin
spec:
  parentRefs:
  - name: mygateway
    namespace: istio-system
  hostnames: ["httpbin.example.com"]
  rules:
  - matches:
    - path:
        type: PathPrefix
        value: /status
    - path:
        type: PathPrefix
        value: /delay
    backendRefs:
    - name: httpbin
      port: 8000
`

// TestSecureGatewayAPITask runs the Gateway API form of the Secure Gateways task from
// the host: the task's kubernetes.io/tls Secret in istio-system, then its Gateway (an
// HTTPS listener with tls Terminate and a certificateRef) and HTTPRoute applied live
// bring the automated deployment mygateway-istio; through `port-forward
// svc/mygateway-istio :443`, curl --resolve --cacert gets the teapot, verifying the
// Secret's certificate for httpbin.example.com; trusting another CA fails.
func TestSecureGatewayAPITask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed on the host")
	}
	certs := taskCerts(t, "httpbin.example.com")
	f := func(name string) string { return filepath.Join(certs, name) }
	l := startLab(t, "testdata/secure-ingress-httpbin.yaml")
	applyYAML(t, l.name, secretFromFiles(t, "istio-system", "httpbin-credential", "kubernetes.io/tls",
		map[string]string{"tls.crt": f("httpbin.example.com.crt"), "tls.key": f("httpbin.example.com.key")})+"---\n"+secureGatewayAPIYAML)
	addr := portForwardSvc(t, l.name, "istio-system", "svc/mygateway-istio", "443")
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"-sS", "-HHost:httpbin.example.com", "--resolve", "httpbin.example.com:" + port + ":127.0.0.1",
		"--cacert", f("example.com.crt"), "https://httpbin.example.com:" + port + "/status/418"}
	deadline := time.Now().Add(40 * time.Second)
	for {
		out, code := hostCurl(t, args...)
		if code == 0 && strings.Contains(out, "I'm a teapot!") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("curl %s: exit %d\n%s\nwant httpbin's teapot over TLS", strings.Join(args, " "), code, out)
		}
		time.Sleep(300 * time.Millisecond)
	}
	// The gateway presents the Secret's certificate: trusting another CA fails (60).
	other := taskCerts(t, "httpbin.example.com")
	bad := slices.Clone(args)
	bad[slices.Index(bad, f("example.com.crt"))] = filepath.Join(other, "example.com.crt")
	if out, code := hostCurl(t, bad...); code != 60 {
		t.Errorf("curl trusting another CA: exit %d\n%s\nwant 60 (the peer certificate cannot be verified)", code, out)
	}
}

// meshlabSays runs meshlab with args and fails unless it succeeds and prints want.
func meshlabSays(t *testing.T, want string, args ...string) {
	t.Helper()
	if out := mustMeshlab(t, args...); !strings.Contains(out, want) {
		t.Fatalf("meshlab %s:\n%s\nwant %q", strings.Join(args, " "), out, want)
	}
}
