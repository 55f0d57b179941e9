package fidelity

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	secretservice "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"

	"github.com/meshlab/meshlab/controlplane/model"
)

// startSDS serves pod p's workload certificate ("default"), its root ("ROOTCA") and the system roots ("file-root:system") over
// SDS on the unix socket sock, as pilot-agent does for its proxy, so that istiod's
// clusters and listeners with Istio's SDS transport sockets warm as they do in a pod
// (without it the proxy waits for their secrets and never asks for listeners). The
// certificates are throwaway: a fresh root per pod, the leaf naming the pod's SPIFFE ID.
// node is the node id the proxy announces (a sidecar's or a waypoint's): the secrets
// are served to it.
func startSDS(sock, node string, p *model.Pod) (stop func(), err error) {
	rootKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	rootTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{Organization: []string{"cluster.local"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	rootDER, err := x509.CreateCertificate(rand.Reader, rootTmpl, rootTmpl, &rootKey.PublicKey, rootKey)
	if err != nil {
		return nil, fmt.Errorf("sign sds root: %w", err)
	}
	root, _ := x509.ParseCertificate(rootDER)
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	id := &url.URL{Scheme: "spiffe", Host: "cluster.local", Path: "/ns/" + p.Namespace + "/sa/" + p.ServiceAccount}
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2), URIs: []*url.URL{id},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}, root, &leafKey.PublicKey, rootKey)
	if err != nil {
		return nil, fmt.Errorf("sign sds leaf: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(leafKey)
	if err != nil {
		return nil, err
	}
	pemOf := func(typ string, der []byte) *corev3.DataSource {
		return &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})}}
	}
	secrets := []types.Resource{
		&tlsv3.Secret{Name: "default", Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
			CertificateChain: pemOf("CERTIFICATE", leafDER), PrivateKey: pemOf("EC PRIVATE KEY", keyDER)}}},
		&tlsv3.Secret{Name: "ROOTCA", Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			TrustedCa: pemOf("CERTIFICATE", rootDER)}}},
		// The system roots, which pilot-agent reads from the proxy's trust store for a
		// DestinationRule's SIMPLE tls without caCertificates (the pod's root stands in).
		&tlsv3.Secret{Name: "file-root:system", Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			TrustedCa: pemOf("CERTIFICATE", rootDER)}}},
		// The certificate files of the sidecar TLS termination scenario's Sidecar
		// (testdata/scenarios/sidecar-ingress-tls.yaml), which pilot-agent reads from the
		// proxy's volumes: the pod's own certificate and root stand in.
		&tlsv3.Secret{Name: "file-cert:/etc/istio/tls-certs/tls.crt~/etc/istio/tls-certs/tls.key", Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
			CertificateChain: pemOf("CERTIFICATE", leafDER), PrivateKey: pemOf("EC PRIVATE KEY", keyDER)}}},
		&tlsv3.Secret{Name: "file-root:/etc/istio/tls-ca-certs/ca.crt", Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			TrustedCa: pemOf("CERTIFICATE", rootDER)}}},
	}
	cache := cachev3.NewSnapshotCache(false, cachev3.IDHash{}, nil)
	snap, err := cachev3.NewSnapshot("1", map[resource.Type][]types.Resource{resource.SecretType: secrets})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := cache.SetSnapshot(ctx, node, snap); err != nil {
		cancel()
		return nil, err
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("listen sds: %w", err)
	}
	gs := grpc.NewServer()
	secretservice.RegisterSecretDiscoveryServiceServer(gs, serverv3.NewServer(ctx, cache, nil))
	go func() { _ = gs.Serve(ln) }()
	return func() { gs.Stop(); cancel() }, nil
}
