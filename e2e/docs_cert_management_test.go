package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// istio.io's certificate and TLS security task pages (tasks/security/cert-management,
// tasks/security/tls-configuration) walked as their snips.sh write them: bash runs each
// page's lines in a working directory of the test's own that holds Istio's samples/ and
// tools/ (the module's, unchanged, linked), with kubectl and istioctl changed to
// meshlab; openssl, sed, awk and diff are the machine's, as the reader's.

// startCertPageLab starts a lab with nothing installed and returns it with the page's
// working directory: samples/ and tools/ linked to the Istio module's.
func startCertPageLab(t *testing.T) *pageLab {
	t.Helper()
	requireHostTool(t, "openssl")
	dir := t.TempDir()
	samples := testutil.IstioSamples(t)
	for _, d := range []string{"samples", "tools"} {
		if err := os.Symlink(filepath.Join(filepath.Dir(samples), d), filepath.Join(dir, d)); err != nil {
			t.Fatal(err)
		}
	}
	return &pageLab{docsLab: &docsLab{taskLab: startTaskLabFrom(t, "# a cluster before the task\n"), t: t}, samples: dir}
}

// answerY runs the page's lines with "y" on stdin (istioctl install's y/N, which the
// page's test answers with echo y) and returns what they print.
func (p *pageLab) answerY(lines string) string {
	p.t.Helper()
	cmd := p.command(lines)
	cmd.Stdin = strings.NewReader("y\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		p.t.Fatalf("%s\n%v\n%s", lines, err, out)
	}
	return string(out)
}

// TestWorkloadMinTLSVersionTask walks "Istio Workload Minimum TLS Version Configuration"
// (tasks/security/tls-configuration/workload-min-tls-version): Istio installed with
// meshConfig.meshMTLS.minProtocolVersion TLSV1_3, httpbin and sleep injected in foo,
// sleep reaches httpbin (200); openssl s_client from sleep's istio-proxy container to
// httpbin's inbound (ALPN istio, the mesh's mTLS) negotiates TLS 1.3 when offered it and
// no cipher at all when it offers TLS 1.2 only. Then the page's clean up.
func TestWorkloadMinTLSVersionTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	p := startCertPageLab(t)
	if out := p.answerY(`cat <<EOF > ./istio.yaml
apiVersion: install.istio.io/v1alpha1
kind: IstioOperator
spec:
  meshConfig:
    meshMTLS:
      minProtocolVersion: TLSV1_3
EOF
istioctl install --set values.pilot.env.PILOT_ENABLE_CONFIG_DISTRIBUTION_TRACKING=true -f ./istio.yaml`); !strings.HasSuffix(out, "✔ Installation complete\nMade this installation the default for injection and validation.\n") {
		t.Errorf("install -f ./istio.yaml printed %q, want istioctl's lines", out)
	}
	p.sh(`kubectl create ns foo
kubectl apply -f <(istioctl kube-inject -f samples/httpbin/httpbin.yaml) -n foo
kubectl apply -f <(istioctl kube-inject -f samples/sleep/sleep.yaml) -n foo`)
	p.shows("200\n", `kubectl exec "$(kubectl get pod -l app=sleep -n foo -o jsonpath={.items..metadata.name})" -c sleep -n foo -- curl http://httpbin.foo:8000/ip -sS -o /dev/null -w "%{http_code}\n"`)
	p.step("httpbin and sleep injected in foo: 200")

	// The page's checks, which its test runs until their output contains the page's.
	tls13 := `kubectl exec "$(kubectl get pod -l app=sleep -n foo -o jsonpath={.items..metadata.name})" -c istio-proxy -n foo -- openssl s_client -alpn istio -tls1_3 -connect httpbin.foo:8000 | grep "TLSv1.3"`
	tls12 := `kubectl exec "$(kubectl get pod -l app=sleep -n foo -o jsonpath={.items..metadata.name})" -c istio-proxy -n foo -- openssl s_client -alpn istio -tls1_2 -connect httpbin.foo:8000 | grep "Cipher is (NONE)"`
	stdout := func(lines string) func() string {
		return func() string {
			cmd := p.command(lines)
			out, _ := cmd.Output() // the page's pipe greps s_client's stdout; its stderr goes to the terminal
			return string(out)
		}
	}
	p.until("s_client -tls1_3 negotiating TLSv1.3", stdout(tls13), func(out string) bool { return strings.Contains(out, "TLSv1.3") })
	p.until("s_client -tls1_2 getting no cipher", stdout(tls12), func(out string) bool { return strings.Contains(out, "Cipher is (NONE)") })
	p.step("s_client: TLS 1.3 negotiated, TLS 1.2 refused")

	// Not the page's: the same lab without the setting takes TLS 1.2 (the refusal above
	// is the mesh config's doing, not the proxy's default).
	p.answerY(`istioctl install --set values.pilot.env.PILOT_ENABLE_CONFIG_DISTRIBUTION_TRACKING=true -y`)
	p.until("s_client -tls1_2 negotiating TLSv1.2 once minProtocolVersion is gone",
		stdout(`kubectl exec "$(kubectl get pod -l app=sleep -n foo -o jsonpath={.items..metadata.name})" -c istio-proxy -n foo -- openssl s_client -alpn istio -tls1_2 -connect httpbin.foo:8000 | grep "TLSv1.2"`),
		func(out string) bool { return strings.Contains(out, "TLSv1.2") && !strings.Contains(out, "(NONE)") })

	out := p.sh(`set -e
kubectl delete -f samples/httpbin/httpbin.yaml -n foo
kubectl delete -f samples/sleep/sleep.yaml -n foo
istioctl uninstall --purge -y
kubectl delete ns foo istio-system`)
	for _, want := range []string{`deployment.apps "httpbin" deleted`, `deployment.apps "sleep" deleted`, "✔ Uninstall complete", `namespace "foo" deleted`, `namespace "istio-system" deleted`} {
		if !strings.Contains(out, want) {
			t.Errorf("the page's clean up printed no %q:\n%s", want, out)
		}
	}
}

// TestPluginCACertTask walks "Plug in CA Certificates"
// (tasks/security/cert-management/plugin-ca-cert): a root and cluster1's intermediate
// made by Istio's tools/certs/Makefile.selfsigned.mk (the machine's make and openssl),
// the cacerts Secret created from them in istio-system before the demo install, httpbin
// and sleep injected in foo under STRICT mTLS. openssl s_client from sleep's istio-proxy
// container shows httpbin's chain as istiod signs it with the plugged-in intermediate:
// the leaf, cluster1's ca-cert.pem, the root; the page compares them with the files
// (openssl x509 -text, diff -s) and verifies the leaf against both. Then the page's clean
// up.
func TestPluginCACertTask(t *testing.T) {
	testutil.RequireRoot(t)
	requireHostTool(t, "make")
	t.Parallel()
	p := startCertPageLab(t)
	t.Cleanup(func() {
		// The page's files in /tmp, which its diffs write.
		for _, f := range []string{"root-cert.crt.txt", "pod-root-cert.crt.txt", "ca-cert.crt.txt", "pod-cert-chain-ca.crt.txt"} {
			_ = os.Remove(filepath.Join("/tmp", f))
		}
	})
	out := p.sh(`mkdir -p certs
pushd certs
make -f ../tools/certs/Makefile.selfsigned.mk root-ca
make -f ../tools/certs/Makefile.selfsigned.mk cluster1-cacerts
kubectl create namespace istio-system
kubectl create secret generic cacerts -n istio-system \
      --from-file=cluster1/ca-cert.pem \
      --from-file=cluster1/ca-key.pem \
      --from-file=cluster1/root-cert.pem \
      --from-file=cluster1/cert-chain.pem
popd`)
	if !containsAll(out, "namespace/istio-system created\n", "secret/cacerts created\n") {
		t.Errorf("the page's plug-in lines printed:\n%s\nwant kubectl's namespace/istio-system created and secret/cacerts created", out)
	}
	p.step("root and cluster1's intermediate made, cacerts created")
	if out := p.answerY(`istioctl install --set values.pilot.env.PILOT_ENABLE_CONFIG_DISTRIBUTION_TRACKING=true --set profile=demo`); !strings.HasSuffix(out, "✔ Installation complete\nMade this installation the default for injection and validation.\n") {
		t.Errorf("install printed %q, want istioctl's lines", out)
	}
	p.sh(`kubectl create ns foo
kubectl apply -f <(istioctl kube-inject -f samples/httpbin/httpbin.yaml) -n foo
kubectl apply -f <(istioctl kube-inject -f samples/sleep/sleep.yaml) -n foo`)
	if out := p.sh(`kubectl apply -n foo -f - <<EOF
apiVersion: security.istio.io/v1beta1
kind: PeerAuthentication
metadata:
  name: "default"
spec:
  mtls:
    mode: STRICT
EOF`); out != "peerauthentication.security.istio.io/default created\n" {
		t.Errorf("apply the PeerAuthentication printed %q", out)
	}
	p.shows("200\n", sleepExec("foo")+` curl http://httpbin.foo:8000/ip -sS -o /dev/null -w "%{http_code}\n"`)
	p.step("httpbin and sleep in foo, STRICT: 200")

	// The page's s_client (its "sleep 20" waits for the certificates; the test retries
	// instead): s_client fails once STRICT mTLS asks it for a certificate it has not, but
	// the server's chain is printed by then.
	p.until("httpbin's chain of three certificates in httpbin-proxy-cert.txt", func() string {
		_, _ = p.command(`kubectl exec "$(kubectl get pod -l app=sleep -n foo -o jsonpath={.items..metadata.name})" -c istio-proxy -n foo -- openssl s_client -showcerts -connect httpbin.foo:8000 > httpbin-proxy-cert.txt`).CombinedOutput()
		b, _ := os.ReadFile(filepath.Join(p.samples, "httpbin-proxy-cert.txt"))
		return string(b)
	}, func(out string) bool { return strings.Count(out, "-----BEGIN CERTIFICATE-----") >= 3 })
	p.sh(`sed -n '/-----BEGIN CERTIFICATE-----/{:start /-----END CERTIFICATE-----/!{N;b start};/.*/p}' httpbin-proxy-cert.txt > certs.pem
awk 'BEGIN {counter=0;} /BEGIN CERT/{counter++} { print > "proxy-cert-" counter ".pem"}' < certs.pem`)
	for _, c := range []struct{ lines, want string }{
		{`openssl x509 -in certs/cluster1/root-cert.pem -text -noout > /tmp/root-cert.crt.txt
openssl x509 -in ./proxy-cert-3.pem -text -noout > /tmp/pod-root-cert.crt.txt
diff -s /tmp/root-cert.crt.txt /tmp/pod-root-cert.crt.txt`, "Files /tmp/root-cert.crt.txt and /tmp/pod-root-cert.crt.txt are identical\n"},
		{`openssl x509 -in certs/cluster1/ca-cert.pem -text -noout > /tmp/ca-cert.crt.txt
openssl x509 -in ./proxy-cert-2.pem -text -noout > /tmp/pod-cert-chain-ca.crt.txt
diff -s /tmp/ca-cert.crt.txt /tmp/pod-cert-chain-ca.crt.txt`, "Files /tmp/ca-cert.crt.txt and /tmp/pod-cert-chain-ca.crt.txt are identical\n"},
		{`openssl verify -CAfile <(cat certs/cluster1/ca-cert.pem certs/cluster1/root-cert.pem) ./proxy-cert-1.pem`, "./proxy-cert-1.pem: OK\n"},
	} {
		if out, _ := p.command(c.lines).CombinedOutput(); string(out) != c.want {
			t.Errorf("%s\nprinted:\n%s\nwant the page's:\n%s", c.lines, out, c.want)
		}
	}
	// Not the page's: the leaf names httpbin's identity, and the chain's third
	// certificate is the root (the page's check compares its text only).
	if out := p.sh(`openssl x509 -in ./proxy-cert-1.pem -noout -ext subjectAltName`); !strings.Contains(out, "URI:spiffe://cluster.local/ns/foo/sa/httpbin") {
		t.Errorf("httpbin's leaf:\n%s\nwant the SAN spiffe://cluster.local/ns/foo/sa/httpbin", out)
	}
	p.step("httpbin's chain: leaf, cluster1's intermediate, the plugged-in root")

	out = p.sh(`set -e
rm -rf certs
kubectl delete secret cacerts -n istio-system
kubectl delete peerauthentication -n foo default
kubectl delete -f samples/sleep/sleep.yaml -n foo
kubectl delete -f samples/httpbin/httpbin.yaml -n foo
istioctl uninstall --purge -y
kubectl delete ns foo istio-system`)
	for _, want := range []string{`secret "cacerts" deleted`, `peerauthentication.security.istio.io "default" deleted`, `deployment.apps "sleep" deleted`, `deployment.apps "httpbin" deleted`, "✔ Uninstall complete", `namespace "foo" deleted`, `namespace "istio-system" deleted`} {
		if !strings.Contains(out, want) {
			t.Errorf("the page's clean up printed no %q:\n%s", want, out)
		}
	}
}

// TestDNSCertTask walks "Istio DNS Certificate Management"
// (tasks/security/cert-management/dns-cert) as its page writes it: Istio installed from
// an IstioOperator whose meshConfig.certificates name two DNS certificates; the Secret
// dns.example1-service-account holds a certificate for example1's DNS names (the page's
// jsonpath, base64 --decode and openssl x509 -text, its printed SAN lines); deleted, it
// is made again within the page's sleep 10. Then the page's clean up.
func TestDNSCertTask(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	p := startCertPageLab(t)
	if out := p.answerY(`cat <<EOF > ./istio.yaml
apiVersion: install.istio.io/v1alpha1
kind: IstioOperator
spec:
  meshConfig:
    certificates:
      - secretName: dns.example1-service-account
        dnsNames: [example1.istio-system.svc, example1.istio-system]
      - secretName: dns.example2-service-account
        dnsNames: [example2.istio-system.svc, example2.istio-system]
EOF
istioctl install -f ./istio.yaml`); !strings.HasSuffix(out, "✔ Installation complete\nMade this installation the default for injection and validation.\n") {
		t.Errorf("install -f ./istio.yaml printed %q, want istioctl's lines", out)
	}
	// The page's check, as its test runs it: trailing spaces removed, its two lines
	// contained.
	check := func(lines string) func() string {
		return func() string {
			out, _ := p.command(lines + ` | sed 's/[ ]*$//'`).Output()
			return string(out)
		}
	}
	const san = "            X509v3 Subject Alternative Name:\n                DNS:example1.istio-system.svc, DNS:example1.istio-system\n"
	p.until("example1's certificate naming its DNS names",
		check(`kubectl get secret dns.example1-service-account -n istio-system -o jsonpath="{.data['cert-chain\.pem']}" | base64 --decode | openssl x509 -in /dev/stdin -text -noout`),
		func(out string) bool { return strings.Contains(out, san) })
	before := p.sh(`kubectl get secret dns.example1-service-account -n istio-system -o jsonpath="{.data['cert-chain\.pem']}"`)
	// Not the page's: example2's Secret is there too, of Istio's DNS certificate type,
	// and its certificate verifies with the root it holds.
	if out := p.sh(`kubectl get secret dns.example2-service-account -n istio-system -o jsonpath='{.type}'`); out != "istio.io/dns-key-and-cert" {
		t.Errorf("dns.example2-service-account's type is %q, want istio.io/dns-key-and-cert", out)
	}
	if out := p.sh(`kubectl get secret dns.example2-service-account -n istio-system -o jsonpath="{.data['root-cert\.pem']}" | base64 --decode > example2-root.pem
kubectl get secret dns.example2-service-account -n istio-system -o jsonpath="{.data['cert-chain\.pem']}" | base64 --decode > example2-chain.pem
openssl verify -CAfile example2-root.pem example2-chain.pem`); out != "example2-chain.pem: OK\n" {
		t.Errorf("example2's certificate against its root-cert.pem: %q", out)
	}
	p.step("the DNS certificates are provisioned")

	if out := p.sh(`kubectl delete secret dns.example1-service-account -n istio-system`); out != "secret \"dns.example1-service-account\" deleted\n" {
		t.Errorf("delete secret printed %q", out)
	}
	if out := check(`sleep 10; kubectl get secret dns.example1-service-account -n istio-system -o jsonpath="{.data['cert-chain\.pem']}" | base64 --decode | openssl x509 -in /dev/stdin -text -noout`)(); !strings.Contains(out, san) {
		t.Errorf("10 s after the delete the page's check printed:\n%s\nwant it to contain:\n%s", out, san)
	}
	if after := p.sh(`kubectl get secret dns.example1-service-account -n istio-system -o jsonpath="{.data['cert-chain\.pem']}"`); after == before {
		t.Error("the regenerated certificate is the deleted one, want a new one")
	}
	p.step("the deleted DNS certificate is made again")

	if out := p.sh(`kubectl delete ns istio-system`); !strings.Contains(out, `namespace "istio-system" deleted`) {
		t.Errorf("the page's clean up printed %q", out)
	}
}
