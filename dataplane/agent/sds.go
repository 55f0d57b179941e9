package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	secretservice "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
)

// SDS resource names, as Istio's agent serves them.
const (
	SecretDefault = "default"
	SecretRootCA  = "ROOTCA"
	secretTypeURL = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
)

// SDSSocketPath returns the path of the SDS socket in a pod run directory.
func SDSSocketPath(runDir string) string { return filepath.Join(runDir, "sds.sock") }

// sdsServer serves the certManager's certificate as Envoy's SecretDiscoveryService (SotW
// streams and Fetch; no delta). Every new certificate is pushed on every open stream, so a
// rotation needs no new epoch.
type sdsServer struct {
	secretservice.UnimplementedSecretDiscoveryServiceServer
	certs *certManager
	// systemCA is the file "file-root:system" reads; "" = the host's bundle.
	systemCA string
	// volumeRoot holds the proxy container's volume files (Config.VolumeRoot); "" = none.
	volumeRoot string
	log        *slog.Logger
}

var _ secretservice.SecretDiscoveryServiceServer = (*sdsServer)(nil)

// serveSDS serves SDS on ln until ctx ends.
func serveSDS(ctx context.Context, ln net.Listener, certs *certManager, systemCA, volumeRoot string, log *slog.Logger) error {
	g := grpc.NewServer()
	secretservice.RegisterSecretDiscoveryServiceServer(g, &sdsServer{certs: certs, systemCA: systemCA, volumeRoot: volumeRoot, log: log})
	errc := make(chan error, 1)
	go func() { errc <- g.Serve(ln) }()
	select {
	case <-ctx.Done():
		g.Stop() // streams never end on their own; the proxy reconnects to the next agent
		<-errc
		return nil
	case err := <-errc:
		return fmt.Errorf("serve sds: %w", err)
	}
}

// listenSDS binds the SDS socket with mode 0660 and group gid, so that the proxy (gid
// 1337) can connect and the app cannot.
func listenSDS(path string, gid int) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale sds socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on sds socket: %w", err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod sds socket: %w", err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(path, 0, gid); err != nil {
			ln.Close()
			return nil, fmt.Errorf("chown sds socket: %w", err)
		}
	}
	return ln, nil
}

// StreamSecrets answers the first request and every change of resource names with the
// current secrets, and pushes new ones when the certificate rotates. ACKs and NACKs
// (requests carrying the last nonce with the same names) get no answer; ACKs are
// recorded, so that a renewal can wait until the proxy applied the new secrets.
func (s *sdsServer) StreamSecrets(stream secretservice.SecretDiscoveryService_StreamSecretsServer) error {
	ctx := stream.Context()
	reqs := make(chan *discoverypb.DiscoveryRequest)
	recvErr := make(chan error, 1)
	go func() {
		for {
			r, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case reqs <- r:
			case <-ctx.Done():
				return
			}
		}
	}()
	var (
		names   []string
		started bool
		sent    *workloadCert
		nonce   int
	)
	acked := s.certs.acks.open()
	defer s.certs.acks.closeStream(acked)
	for {
		cur, changed := s.certs.current()
		if started && cur != nil && cur != sent {
			nonce++
			resp, err := s.secretsResponse(cur, names, nonce)
			if err != nil {
				return status.Error(codes.Internal, err.Error())
			}
			if err := stream.Send(resp); err != nil {
				return err
			}
			sent = cur
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-recvErr:
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		case r := <-reqs:
			if r.GetErrorDetail() != nil {
				s.log.Warn("sds NACK", "nonce", r.GetResponseNonce(), "err", r.GetErrorDetail().GetMessage())
			} else if sent != nil && r.GetResponseNonce() == strconv.Itoa(nonce) {
				s.certs.acks.ack(acked, r.GetVersionInfo()) // the proxy applied what was last sent
			}
			n := slices.Sorted(slices.Values(r.GetResourceNames()))
			if !started || !slices.Equal(n, names) {
				started, names, sent = true, n, nil // (re)send for the new names
			}
		case <-changed:
		}
	}
}

// FetchSecrets answers one request with the current secrets.
func (s *sdsServer) FetchSecrets(_ context.Context, r *discoverypb.DiscoveryRequest) (*discoverypb.DiscoveryResponse, error) {
	cur, _ := s.certs.current()
	if cur == nil {
		return nil, status.Error(codes.Unavailable, "no workload certificate yet")
	}
	return s.secretsResponse(cur, r.GetResourceNames(), 0)
}

// secretsResponse renders the requested secrets (all when names is empty; unknown names
// and unreadable files are left out) of c. The version is the leaf's serial, so it
// changes with every rotation.
func (s *sdsServer) secretsResponse(c *workloadCert, names []string, nonce int) (*discoverypb.DiscoveryResponse, error) {
	if len(names) == 0 {
		names = []string{SecretDefault, SecretRootCA}
	}
	resp := &discoverypb.DiscoveryResponse{VersionInfo: serial(c.leaf), TypeUrl: secretTypeURL, Nonce: strconv.Itoa(nonce)}
	for _, n := range names {
		sec := secretFor(c, n)
		if path, ok := strings.CutPrefix(n, SecretFileRootPrefix); ok {
			sec = s.fileRoot(n, path)
		}
		if paths, ok := strings.CutPrefix(n, SecretFileCertPrefix); ok {
			sec = s.fileCert(n, paths)
		}
		if sec == nil {
			continue
		}
		a, err := anypb.New(sec)
		if err != nil {
			return nil, fmt.Errorf("pack secret %s: %w", n, err)
		}
		resp.Resources = append(resp.Resources, a)
	}
	return resp, nil
}

func inline(b []byte) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: b}}
}

// secretFor returns the named secret of c, or nil for a name the agent does not serve.
func secretFor(c *workloadCert, name string) *tlsv3.Secret {
	switch name {
	case SecretDefault:
		return &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
			CertificateChain: inline(c.chainPEM), PrivateKey: inline(c.keyPEM),
		}}}
	case SecretRootCA:
		return &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			TrustedCa: inline(c.rootPEM),
		}}}
	}
	return nil
}

// SecretFileRootPrefix names a validation secret read from a file, as Istio's agent
// serves the CA files a DestinationRule names ("file-root:/etc/certs/ca.pem") and the
// system trust bundle ("file-root:system", SIMPLE TLS without caCertificates).
const SecretFileRootPrefix = "file-root:"

// systemBundles are where distributions keep the system trust bundle, as Go's
// crypto/x509 looks for it.
var systemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",                // Debian, Ubuntu, Gentoo, Arch
	"/etc/pki/tls/certs/ca-bundle.crt",                  // Fedora, RHEL
	"/etc/ssl/ca-bundle.pem",                            // openSUSE
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", // CentOS, RHEL 7
	"/etc/ssl/cert.pem",                                 // Alpine
}

// fileRoot returns the validation secret name whose roots are the PEM certificates of
// path ("system": the pod's system bundle), or nil when the file cannot be read or
// holds no certificate, so the proxy keeps waiting for it as Envoy waits for the agent.
func (s *sdsServer) fileRoot(name, path string) *tlsv3.Secret {
	if path == "system" {
		path = s.systemCA
		for _, p := range systemBundles {
			if path != "" {
				break
			}
			if _, err := os.Stat(p); err == nil {
				path = p
			}
		}
	}
	pem, err := s.readFile(path)
	if err != nil || !strings.Contains(string(pem), "-----BEGIN CERTIFICATE-----") {
		s.log.Warn("sds: no CA certificates for "+name, "file", path, "err", err)
		return nil
	}
	return &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
		TrustedCa: inline(pem),
	}}}
}

// SecretFileCertPrefix names a certificate secret read from two files, as Istio's agent
// serves "file-cert:<certificate chain>~<private key>" for the certificate files a
// Sidecar's ingress tls (or a gateway's) names.
const SecretFileCertPrefix = "file-cert:"

// fileCert returns the certificate secret name whose chain and key are the files paths
// names ("<chain>~<key>"), or nil when either cannot be read or does not hold PEM of
// its kind, so the proxy keeps waiting for it as Envoy waits for the agent.
func (s *sdsServer) fileCert(name, paths string) *tlsv3.Secret {
	chainPath, keyPath, ok := strings.Cut(paths, "~")
	if !ok {
		s.log.Warn("sds: file-cert secret without ~ between certificate and key", "name", name)
		return nil
	}
	chain, err := s.readFile(chainPath)
	if err != nil || !strings.Contains(string(chain), "-----BEGIN CERTIFICATE-----") {
		s.log.Warn("sds: no certificate chain for "+name, "file", chainPath, "err", err)
		return nil
	}
	key, err := s.readFile(keyPath)
	if err != nil || !strings.Contains(string(key), "PRIVATE KEY-----") {
		s.log.Warn("sds: no private key for "+name, "file", keyPath, "err", err)
		return nil
	}
	return &tlsv3.Secret{Name: name, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		CertificateChain: inline(chain), PrivateKey: inline(key),
	}}}
}

// readFile reads path as the proxy's container sees it: below the volume root when a
// volume file is there, else the host's (a meshlab pod's filesystem is the host's).
func (s *sdsServer) readFile(path string) ([]byte, error) {
	if s.volumeRoot != "" && filepath.IsAbs(path) {
		b, err := os.ReadFile(filepath.Join(s.volumeRoot, filepath.Clean(path)))
		if err == nil || !errors.Is(err, fs.ErrNotExist) {
			return b, err
		}
	}
	return os.ReadFile(path)
}
