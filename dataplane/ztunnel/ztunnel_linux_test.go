package ztunnel

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshlab/meshlab/ambientapi/security"
	"github.com/meshlab/meshlab/ambientapi/workload"
	"github.com/meshlab/meshlab/ambientapi/zds"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/netns"
)

// testCA signs CSRs as the lab's CA does for ztunnel: the impersonated identity becomes
// the certificate's URI SAN.
type testCA struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	asked  chan string
	pemStr string
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{Organization: []string{"cluster.local"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &testCA{cert: c, key: key, asked: make(chan string, 16), pemStr: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}
}

func (ca *testCA) Sign(_ context.Context, csrPEM []byte, id string, ttl time.Duration) ([]string, error) {
	ca.asked <- id
	b, _ := pem.Decode(csrPEM)
	csr, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		return nil, err
	}
	if len(csr.URIs) != 1 || csr.URIs[0].String() != id {
		return nil, fmt.Errorf("csr for %v, impersonating %s", csr.URIs, id)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(ttl),
		URIs: csr.URIs, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, csr.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	return []string{string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), ca.pemStr}, nil
}

// inpodRules are istio-cni's in-pod rules (REDIRECT mode, without DNS capture), which the
// lab's node agent installs (netns/inpod); written out here so this test stands alone.
const inpodRules = `*mangle
:ISTIO_PRERT - [0:0]
:ISTIO_OUTPUT - [0:0]
-A PREROUTING -j ISTIO_PRERT
-A OUTPUT -j ISTIO_OUTPUT
-A ISTIO_PRERT -m mark --mark 0x539/0xfff -j CONNMARK --set-xmark 0x111/0xfff
-A ISTIO_OUTPUT -m connmark --mark 0x111/0xfff -j CONNMARK --restore-mark --nfmask 0xffffffff --ctmask 0xffffffff
COMMIT
*nat
:ISTIO_PRERT - [0:0]
:ISTIO_OUTPUT - [0:0]
-A PREROUTING -j ISTIO_PRERT
-A OUTPUT -j ISTIO_OUTPUT
-A ISTIO_PRERT ! -d 127.0.0.1/32 -p tcp ! --dport 15008 -m mark ! --mark 0x539/0xfff -j REDIRECT --to-ports 15006
-A ISTIO_OUTPUT -p tcp -m mark --mark 0x111/0xfff -j ACCEPT
-A ISTIO_OUTPUT ! -d 127.0.0.1/32 -o lo -j ACCEPT
-A ISTIO_OUTPUT ! -d 127.0.0.1/32 -p tcp -m mark ! --mark 0x539/0xfff -j REDIRECT --to-ports 15001
COMMIT
`

func run(t *testing.T, stdin string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

// lab is three pods on one bridge in throwaway namespaces: a and b enrolled, c not.
type testLab struct {
	prefix string
	pods   map[string]string // short name -> netns name
}

func newTestLab(t *testing.T) *testLab {
	t.Helper()
	testutil.RequireRoot(t)
	l := &testLab{prefix: "ml-" + testutil.UniqueName(t), pods: map[string]string{}}
	node := l.prefix + "-n"
	mk := func(name string) {
		if err := netns.Create(name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := netns.Delete(name); err != nil {
				t.Errorf("delete netns %s: %v", name, err)
			}
		})
		run(t, "", "ip", "-n", name, "link", "set", "lo", "up")
	}
	mk(node)
	run(t, "", "ip", "-n", node, "link", "add", "br0", "type", "bridge")
	run(t, "", "ip", "-n", node, "link", "set", "br0", "up")
	for i, p := range []string{"a", "b", "c"} {
		ns := l.prefix + "-" + p
		mk(ns)
		l.pods[p] = ns
		run(t, "", "ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", "v"+p, "netns", node)
		run(t, "", "ip", "-n", ns, "addr", "add", fmt.Sprintf("10.77.0.%d/24", i+1), "dev", "eth0")
		run(t, "", "ip", "-n", ns, "link", "set", "eth0", "up")
		run(t, "", "ip", "-n", ns, "route", "add", "default", "dev", "eth0")
		run(t, "", "ip", "-n", node, "link", "set", "v"+p, "master", "br0", "up")
		if p == "c" {
			continue
		}
		run(t, inpodRules, "ip", "netns", "exec", ns, "iptables-restore", "--noflush")
		run(t, "", "ip", "-n", ns, "rule", "add", "fwmark", "0x111/0xfff", "pref", "32764", "lookup", "100")
		run(t, "", "ip", "-n", ns, "route", "add", "local", "0.0.0.0/0", "dev", "lo", "table", "100")
	}
	return l
}

func wds(node string) []*workload.Address {
	svcKey := "default/b.default.svc.cluster.local"
	mk := func(name string, ip string, proto workload.TunnelProtocol, nodeName string, svcs map[string]*workload.PortList) *workload.Address {
		return &workload.Address{Type: &workload.Address_Workload{Workload: &workload.Workload{
			Uid: "Kubernetes//Pod/default/" + name, Name: name, Namespace: "default", ServiceAccount: name,
			Addresses: [][]byte{netip.MustParseAddr(ip).AsSlice()}, TunnelProtocol: proto, Node: nodeName,
			WorkloadName: name, WorkloadType: workload.WorkloadType_POD, CanonicalName: name, CanonicalRevision: "v1",
			Services: svcs, ClusterId: "Kubernetes",
		}}}
	}
	return []*workload.Address{
		mk("a", "10.77.0.1", workload.TunnelProtocol_HBONE, node, nil),
		mk("b", "10.77.0.2", workload.TunnelProtocol_HBONE, node, map[string]*workload.PortList{svcKey: {Ports: []*workload.Port{{ServicePort: 80, TargetPort: 8080}}}}),
		mk("c", "10.77.0.3", workload.TunnelProtocol_NONE, "elsewhere", nil),
		{Type: &workload.Address_Service{Service: &workload.Service{
			Name: "b", Namespace: "default", Hostname: "b.default.svc.cluster.local",
			Addresses: []*workload.NetworkAddress{{Address: netip.MustParseAddr("10.96.0.2").AsSlice()}},
			Ports:     []*workload.Port{{ServicePort: 80, TargetPort: 8080}},
		}}},
	}
}

// echoApp listens in ns on addr; every connection first gets a line naming the address
// it came from, then an echo of what it sends.
func echoApp(t *testing.T, ns, addr string) {
	t.Helper()
	var ln net.Listener
	if err := netns.Do(ns, func() error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { _ = ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				fmt.Fprintf(c, "from %s\n", c.RemoteAddr().(*net.TCPAddr).IP)
				_, _ = io.Copy(c, c)
			}()
		}
	}()
}

func dialFrom(t *testing.T, ns, addr string) (net.Conn, *bufio.Reader, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := netns.DialContext(ctx, ns, "tcp", addr)
	if err != nil {
		return nil, nil, "", err
	}
	_ = c.SetDeadline(time.Now().Add(15 * time.Second))
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		_ = c.Close()
		return nil, nil, "", err
	}
	return c, r, strings.TrimSpace(line), nil
}

func addPod(t *testing.T, z *Ztunnel, l *testLab, p string) {
	t.Helper()
	f, err := os.Open(netns.Path(l.pods[p]))
	if err != nil {
		t.Fatal(err)
	}
	if err := z.pods.AddPod("uid-"+p, &zds.WorkloadInfo{Name: p, Namespace: "default", ServiceAccount: p}, f); err != nil {
		t.Fatal(err)
	}
}

// TestAmbientPath runs one ztunnel for two enrolled pods in real namespaces with istio-cni's
// rules: a -> b's service VIP goes over HBONE (the kernel shows the tunnel on b's 15008)
// and b's app sees a's address; policies deny new connections with a reset and close the
// live ones; STRICT refuses plaintext from a pod outside the mesh; del closes the sockets.
func TestAmbientPath(t *testing.T) {
	l := newTestLab(t)
	ca := newTestCA(t)
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	ctx, cancel := context.WithCancel(context.Background())
	cfg := Config{NodeName: "node", TrustDomain: "cluster.local", ClusterID: "Kubernetes", DNSUpstream: netip.MustParseAddrPort("127.0.0.1:53")}
	accessLog := &testutil.SyncBuffer{}
	z := New(ctx, cfg, ca, roots, Options{AccessLog: accessLog}, testutil.Logger(t))
	t.Cleanup(func() { z.pods.closeAll(); z.pool.Close(); cancel() })
	z.store.ApplyAddresses(wds("node"), nil)
	addPod(t, z, l, "a")
	addPod(t, z, l, "b")
	echoApp(t, l.pods["b"], "10.77.0.2:8080")

	c, r, from, err := dialFrom(t, l.pods["a"], "10.96.0.2:80")
	if err != nil {
		t.Fatalf("a -> b's service: %v", err)
	}
	defer c.Close()
	if from != "from 10.77.0.1" {
		t.Errorf("b's app saw %q, want a's address 10.77.0.1", from)
	}
	fmt.Fprintf(c, "ping\n")
	if got, err := r.ReadString('\n'); err != nil || got != "ping\n" {
		t.Errorf("echo = %q, %v", got, err)
	}
	// The kernel's view in b: an established connection from a to b's 15008.
	ss := run(t, "", "ip", "netns", "exec", l.pods["b"], "ss", "-Htn", "state", "established", "( sport = :15008 )")
	if !strings.Contains(ss, "10.77.0.2]:15008") || !strings.Contains(ss, "10.77.0.1]:") {
		t.Errorf("no tunnel on b's 15008 from a in the kernel's socket table:\n%s", ss)
	}
	var ids []string
	for range 2 {
		select {
		case id := <-ca.asked:
			ids = append(ids, id)
		case <-time.After(time.Second):
		}
	}
	if !contains(ids, "spiffe://cluster.local/ns/default/sa/a") || !contains(ids, "spiffe://cluster.local/ns/default/sa/b") {
		t.Errorf("certificates asked for %v, want a's and b's identities", ids)
	}

	// A DENY of a's identity: the live connection closes, a new one is reset.
	z.store.ApplyAuthorizations([]*security.Authorization{{
		Name: "deny-a", Namespace: "default", Scope: security.Scope_NAMESPACE, Action: security.Action_DENY,
		Groups: []*security.Group{{Rules: []*security.Rules{{Matches: []*security.Match{{
			Principals: []*security.StringMatch{{MatchType: &security.StringMatch_Exact{Exact: "cluster.local/ns/default/sa/a"}}},
		}}}}}},
	}}, nil)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.ReadString('\n'); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the live connection outlived the policy that denies it: %v", err)
	}
	if _, _, _, err := dialFrom(t, l.pods["a"], "10.96.0.2:80"); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("a new denied connection: %v, want a reset", err)
	}
	z.store.ApplyAuthorizations(nil, []string{"default/deny-a"})

	// Plaintext from c (not in the mesh) is let in without STRICT, and the app sees c.
	pc, _, from, err := dialFrom(t, l.pods["c"], "10.77.0.2:8080")
	if err != nil {
		t.Fatalf("c -> b plaintext: %v", err)
	}
	_ = pc.Close()
	if from != "from 10.77.0.3" {
		t.Errorf("b's app saw %q, want c's address", from)
	}
	// STRICT: istiod's static policy, attached to b.
	strict := &security.Authorization{
		Name: "istio_converted_static_strict", Namespace: "istio-system", Scope: security.Scope_WORKLOAD_SELECTOR, Action: security.Action_DENY,
		Groups: []*security.Group{{Rules: []*security.Rules{{Matches: []*security.Match{{
			NotPrincipals: []*security.StringMatch{{MatchType: &security.StringMatch_Presence{}}},
		}}}}}},
	}
	addrs := wds("node")
	addrs[1].GetWorkload().AuthorizationPolicies = []string{"istio-system/istio_converted_static_strict"}
	z.store.ApplyAuthorizations([]*security.Authorization{strict}, nil)
	z.store.ApplyAddresses(addrs, nil)
	if _, _, _, err := dialFrom(t, l.pods["c"], "10.77.0.2:8080"); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("plaintext under STRICT: %v, want a reset", err)
	}
	if hc, _, from, err := dialFrom(t, l.pods["a"], "10.96.0.2:80"); err != nil || from != "from 10.77.0.1" {
		t.Errorf("HBONE under STRICT: %q, %v", from, err)
	} else {
		_ = hc.Close()
	}

	var buf bytes.Buffer
	_ = z.Metrics().WriteText(&buf)
	if !strings.Contains(buf.String(), `connection_security_policy="mutual_tls"`) || !strings.Contains(buf.String(), `reporter="destination"`) {
		t.Errorf("metrics lack the HBONE connections:\n%s", buf.String())
	}

	if log := accessLog.String(); !strings.Contains(log, `src.identity="spiffe://cluster.local/ns/default/sa/a"`) ||
		!strings.Contains(log, `direction="inbound"`) || !strings.Contains(log, "dst.hbone_addr=10.77.0.2:8080") {
		t.Errorf("access log lacks the HBONE connection:\n%s", log)
	}

	// Removing b closes its sockets: nothing listens on its 15008 any more.
	if err := z.pods.DelPod("uid-b"); err != nil {
		t.Fatal(err)
	}
	ss = run(t, "", "ip", "netns", "exec", l.pods["b"], "ss", "-Htln")
	if strings.Contains(ss, ":15008") || strings.Contains(ss, ":15001") {
		t.Errorf("b's ztunnel sockets outlived its removal:\n%s", ss)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
