package ca

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	securitypb "istio.io/api/security/v1alpha1"
)

// Service is Istio's IstioCertificateService backed by a CA and a token table.
type Service struct {
	securitypb.UnimplementedIstioCertificateServiceServer
	ca     *CA
	tokens *Tokens
	log    *slog.Logger
}

var _ securitypb.IstioCertificateServiceServer = (*Service)(nil)

// NewService returns the gRPC service; Register adds it to a gRPC server.
func NewService(c *CA, t *Tokens, log *slog.Logger) *Service {
	return &Service{ca: c, tokens: t, log: log}
}

// Register adds the service to s (the lab's discovery gRPC server).
func (s *Service) Register(g *grpc.Server) {
	securitypb.RegisterIstioCertificateServiceServer(g, s)
}

// ImpersonatedIdentityKey is the field of a CSR request's metadata that names the
// identity a node proxy asks a certificate for on a workload's behalf (Istio's
// security.ImpersonatedIdentity, which ztunnel sends).
const ImpersonatedIdentityKey = "ImpersonatedIdentity"

// CreateCertificate signs the CSR for the identity of the pod whose token is in the
// "authorization: Bearer <token>" metadata. A missing or unknown token is Unauthenticated;
// a CSR for any other identity is PermissionDenied and logged.
//
// With ImpersonatedIdentity in the request's metadata, the certificate is for that
// identity instead, as istiod's CA signs for a trusted node account (its default
// CA_TRUSTED_NODE_ACCOUNTS, istio-system/ztunnel): only ZtunnelIdentity's token may ask,
// for a SPIFFE id of the CA's trust domain. As istiod, a refused impersonation is
// Unauthenticated with an opaque message, the reason being logged.
func (s *Service) CreateCertificate(ctx context.Context, req *securitypb.IstioCertificateRequest) (*securitypb.IstioCertificateResponse, error) {
	tok := bearer(ctx)
	caller, ok := s.tokens.Lookup(tok)
	if tok == "" || !ok {
		s.log.Warn("csr refused: unknown token")
		return nil, status.Error(codes.Unauthenticated, "csr refused: missing or unknown bearer token")
	}
	id := caller.Identity
	if imp := req.GetMetadata().GetFields()[ImpersonatedIdentityKey].GetStringValue(); imp != "" {
		var err error
		if id, err = s.impersonate(caller, imp); err != nil {
			s.log.Warn("csr refused: impersonation", "pod", caller.Pod, "identity", imp, "err", err)
			return nil, status.Error(codes.Unauthenticated, "request impersonation authentication failure")
		}
	}
	chain, err := s.ca.Sign([]byte(req.GetCsr()), id, time.Duration(req.GetValidityDuration())*time.Second)
	if errors.Is(err, ErrIdentity) {
		s.log.Warn("csr refused: identity not allowed", "pod", caller.Pod, "err", err)
		return nil, status.Error(codes.PermissionDenied, err.Error())
	}
	if err != nil {
		s.log.Warn("csr refused", "pod", caller.Pod, "err", err)
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	s.log.Info("certificate issued", "pod", caller.Pod, "identity", id.SPIFFEID(s.ca.TrustDomain()), "impersonated", id != caller.Identity)
	return &securitypb.IstioCertificateResponse{CertChain: chain}, nil
}

// ZtunnelIdentity is ztunnel's own identity: the one node account that may ask for a
// workload's certificate.
var ZtunnelIdentity = Identity{Namespace: "istio-system", ServiceAccount: "ztunnel"}

// ZtunnelCaller is the Caller.Pod of ztunnel's token.
const ZtunnelCaller = "ztunnel.istio-system"

// IssueZtunnel issues ztunnel's own token (identity istio-system/ztunnel): it speaks for
// a ztunnel node on xDS and may ask the CA for workloads' certificates.
func (t *Tokens) IssueZtunnel() (string, error) {
	return t.Issue(Caller{Pod: ZtunnelCaller, Identity: ZtunnelIdentity})
}

// impersonate returns the identity a caller asks to impersonate, spiffe://<td>/ns/<ns>/sa/<sa>,
// when it may.
func (s *Service) impersonate(caller Caller, spiffeID string) (Identity, error) {
	if caller.Identity != ZtunnelIdentity {
		return Identity{}, fmt.Errorf("%w: %s is not a trusted node account (only %s/%s)", ErrIdentity,
			caller.Identity.Namespace+"/"+caller.Identity.ServiceAccount, ZtunnelIdentity.Namespace, ZtunnelIdentity.ServiceAccount)
	}
	id, td, err := ParseSPIFFEID(spiffeID)
	if err != nil {
		return Identity{}, err
	}
	if td != s.ca.TrustDomain() {
		return Identity{}, fmt.Errorf("%w: trust domain %q is not the mesh's %q", ErrIdentity, td, s.ca.TrustDomain())
	}
	return id, nil
}

// ParseSPIFFEID parses a workload identity, spiffe://<trust domain>/ns/<ns>/sa/<sa>.
func ParseSPIFFEID(s string) (Identity, string, error) {
	rest, ok := strings.CutPrefix(s, "spiffe://")
	td, path, ok2 := strings.Cut(rest, "/")
	parts := strings.Split(path, "/")
	if !ok || !ok2 || td == "" || len(parts) != 4 || parts[0] != "ns" || parts[2] != "sa" || parts[1] == "" || parts[3] == "" {
		return Identity{}, "", fmt.Errorf("%w: %q is not spiffe://<trust domain>/ns/<namespace>/sa/<service account>", ErrIdentity, s)
	}
	return Identity{Namespace: parts[1], ServiceAccount: parts[3]}, td, nil
}

// bearer returns the token of the first "authorization: Bearer" metadata value.
func bearer(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if t, ok := strings.CutPrefix(v, "Bearer "); ok {
			return strings.TrimSpace(t)
		}
	}
	return ""
}
