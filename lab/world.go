package lab

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/meshlab/meshlab/demoapp"
	"github.com/meshlab/meshlab/netns"
	"github.com/meshlab/meshlab/netns/podinit"
)

// The lab's outside world: the hosts Istio's egress and TLS tasks reach beyond the mesh
// (httpbin.org, edition.cnn.com, www.google.com) answered by built-in apps in a network
// namespace of the lab's own, ml-<lab>-world, joined to the node namespace by one veth
// pair on a private /24 that overlaps neither the pod nor the service CIDR (the first of
// worldSubnets that fits). The node forwards between pods and world as it does between
// pods; the world has one route, back to the pod CIDR, and no default route, and the node
// has no uplink: nothing reaches anything outside the lab, and no real public address is
// ever used. Each host has an address of its own (.10, .11, ... in host order) and serves
// HTTP on 80 and HTTPS on 443 (h2 and http/1.1), with a certificate for its name from
// the lab's "public" CA: a root of its own, not the mesh CA. The pods trust that CA as
// they trust the Internet's: every app's system bundle (the host's bundle plus the public
// CA, bound in its mount namespace) and the agent's file-root:system, which SIMPLE TLS
// origination without caCertificates verifies against. The lab's DNS answers the hosts
// with the world's addresses (the agents' name tables and the cluster DNS, as the
// resolver a real cluster forwards to would); nothing is forwarded.

// worldPodName is reserved: the world namespace is ml-<lab>-world.
const worldPodName = "world"

// worldIfName is the node's end of the world link.
const worldIfName = "mlworld0"

// worldSubnets are the world's candidate ranges, all private (RFC 1918).
var worldSubnets = []netip.Prefix{
	netip.MustParsePrefix("172.31.255.0/24"),
	netip.MustParsePrefix("192.168.255.0/24"),
	netip.MustParsePrefix("10.255.255.0/24"),
}

// worldFirstHost is the host number of the first outside host in the world subnet.
const worldFirstHost = 10

// WorldNamespace returns the name of lab's outside-world namespace.
func WorldNamespace(lab string) string { return NamespaceName(lab, worldPodName) }

// worldSubnet picks the first world range overlapping neither lab range.
func worldSubnet(pods, services netip.Prefix) (netip.Prefix, error) {
	for _, p := range worldSubnets {
		if !p.Overlaps(pods) && !p.Overlaps(services) {
			return p, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("no range for the lab's outside world: %v all overlap --pod-cidr %s or --service-cidr %s", worldSubnets, pods, services)
}

// worldAddrs maps each outside host to its address in subnet.
func worldAddrs(subnet netip.Prefix) map[string]netip.Addr {
	out := map[string]netip.Addr{}
	a := subnet.Masked().Addr()
	for range worldFirstHost {
		a = a.Next()
	}
	for _, h := range demoapp.ExternalHosts {
		out[h] = a
		a = a.Next()
	}
	return out
}

// world is a running outside world.
type world struct {
	subnet     netip.Prefix
	addrs      map[string]netip.Addr
	caPEM      []byte
	bundlePath string // the pods' system trust bundle: the host's plus the public CA
}

// names returns the world's DNS names, each with its one address.
func (w *world) names() map[string][]netip.Addr {
	out := map[string][]netip.Addr{}
	for h, a := range w.addrs {
		out[h] = []netip.Addr{a}
	}
	return out
}

// WorldCAFile and WorldBundleFile are, in the lab's run directory, the public CA of the
// outside world and the pods' system trust bundle that includes it.
const (
	WorldCAFile     = "world-ca.pem"
	WorldBundleFile = "world-ca-bundle.pem"
)

// createWorld makes the outside world: namespace and link (journalled first), the public
// CA and the pods' trust bundle, and one HTTP and one HTTPS server per host, serving until
// the lab's servers stop. The lab's DNS learns the hosts.
func (l *Lab) createWorld() error {
	subnet, err := worldSubnet(l.opts.PodCIDR, l.opts.ServiceCIDR)
	if err != nil {
		return err
	}
	w := &world{subnet: subnet, addrs: worldAddrs(subnet)}
	ns := WorldNamespace(l.opts.Name)
	if err := l.jr.add(entry{Kind: "netns", Name: ns}); err != nil {
		return err
	}
	cfg := netns.WorldConfig{
		Namespace: ns, NodeNamespace: NodeNamespace(l.opts.Name), NodeIfName: worldIfName,
		NodeAddress: netip.PrefixFrom(subnet.Masked().Addr().Next(), subnet.Bits()),
		PodCIDR:     l.opts.PodCIDR, ServiceCIDR: l.opts.ServiceCIDR,
	}
	for _, h := range demoapp.ExternalHosts {
		cfg.Addresses = append(cfg.Addresses, w.addrs[h])
	}
	if err := l.syscalls().ns.SetupWorld(cfg); err != nil {
		return fmt.Errorf("create the outside world %s: %w", ns, err)
	}
	certs, err := w.makeCA(l.opts.Name, time.Now())
	if err != nil {
		return fmt.Errorf("outside world: %w", err)
	}
	if err := w.writeTrust(l.paths.Dir); err != nil {
		return fmt.Errorf("outside world: %w", err)
	}
	for _, h := range demoapp.ExternalHosts {
		for _, tlsOn := range []bool{false, true} {
			if err := l.serveWorldHost(ns, h, w.addrs[h], tlsOn, certs[h]); err != nil {
				return err
			}
		}
	}
	l.world = w
	l.names.setWorld(w.names())
	l.kubeDNS.setWorld(w.names())
	return nil
}

// makeCA makes the world's public CA and one server certificate per host, valid for a
// year from now; keys stay in memory.
func (w *world) makeCA(lab string, now time.Time) (map[string]tls.Certificate, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("make public CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{Organization: []string{"meshlab outside world"}, CommonName: "meshlab public CA (lab " + lab + ")"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(1, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("make public CA: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	w.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	out := map[string]tls.Certificate{}
	for i, h := range demoapp.ExternalHosts {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(int64(i + 2)),
			Subject:      pkix.Name{CommonName: h},
			DNSNames:     demoapp.ExternalCertNames(h),
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.AddDate(1, 0, 0),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return nil, fmt.Errorf("make certificate of %s: %w", h, err)
		}
		out[h] = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	}
	return out, nil
}

// writeTrust writes the public CA and the pods' trust bundle (the host's first system
// bundle, then the public CA) into dir.
func (w *world) writeTrust(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, WorldCAFile), w.caPEM, 0o644); err != nil {
		return fmt.Errorf("write public CA: %w", err)
	}
	var host []byte
	for _, p := range podinit.SystemBundles {
		if b, err := os.ReadFile(p); err == nil {
			host = b
			break
		}
	}
	if len(host) > 0 && !strings.HasSuffix(string(host), "\n") {
		host = append(host, '\n')
	}
	w.bundlePath = filepath.Join(dir, WorldBundleFile)
	if err := os.WriteFile(w.bundlePath, append(host, w.caPEM...), 0o644); err != nil {
		return fmt.Errorf("write the pods' trust bundle: %w", err)
	}
	return nil
}

// serveWorldHost listens in the world namespace on addr port 80 (or 443 with tls) and
// serves host's app there until the lab's servers stop.
func (l *Lab) serveWorldHost(ns, host string, addr netip.Addr, tlsOn bool, cert tls.Certificate) error {
	h, err := demoapp.ExternalHandler(host, tlsOn)
	if err != nil {
		return err
	}
	port := 80
	if tlsOn {
		port = 443
	}
	ln, err := l.syscalls().ns.Listen(ns, "tcp4", net.JoinHostPort(addr.String(), fmt.Sprint(port)))
	if err != nil {
		return fmt.Errorf("outside world: listen for %s on %s:%d: %w", host, addr, port, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	if tlsOn {
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	var once sync.Once
	stop := func() { once.Do(func() { _ = srv.Close() }) }
	l.servers.Add(2)
	go func() {
		defer l.servers.Done()
		<-l.serverCtx.Done()
		stop()
	}()
	go func() {
		defer l.servers.Done()
		var err error
		if tlsOn {
			err = srv.ServeTLS(ln, "", "")
		} else {
			err = srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			l.log.Warn("outside world server stopped", "host", host, "port", port, "err", err)
		}
	}()
	return nil
}

// worldTrustBundle is the file every pod trusts as its system bundle; "" before the
// world exists (unit tests' bare labs).
func (l *Lab) worldTrustBundle() string {
	if l.world == nil {
		return ""
	}
	return l.world.bundlePath
}

// withWorld returns names with each outside host the table lacks added: the table's own
// entries (a ServiceEntry's addresses) win, as Istio's DNS proxy answers from its table
// before it forwards.
func withWorld(names, world map[string][]netip.Addr) map[string][]netip.Addr {
	if len(world) == 0 {
		return names
	}
	if names == nil {
		names = map[string][]netip.Addr{}
	}
	for h, a := range world {
		if _, ok := names[h]; !ok {
			names[h] = a
		}
	}
	return names
}
