package ca

import (
	"context"
	"errors"
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

// CreateCertificate signs the CSR for the identity of the pod whose token is in the
// "authorization: Bearer <token>" metadata. A missing or unknown token is Unauthenticated;
// a CSR for any other identity is PermissionDenied and logged.
func (s *Service) CreateCertificate(ctx context.Context, req *securitypb.IstioCertificateRequest) (*securitypb.IstioCertificateResponse, error) {
	tok := bearer(ctx)
	caller, ok := s.tokens.Lookup(tok)
	if tok == "" || !ok {
		s.log.Warn("csr refused: unknown token")
		return nil, status.Error(codes.Unauthenticated, "csr refused: missing or unknown bearer token")
	}
	chain, err := s.ca.Sign([]byte(req.GetCsr()), caller.Identity, time.Duration(req.GetValidityDuration())*time.Second)
	if errors.Is(err, ErrIdentity) {
		s.log.Warn("csr refused: identity not allowed", "pod", caller.Pod, "err", err)
		return nil, status.Error(codes.PermissionDenied, err.Error())
	}
	if err != nil {
		s.log.Warn("csr refused", "pod", caller.Pod, "err", err)
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	s.log.Info("certificate issued", "pod", caller.Pod, "identity", caller.Identity.SPIFFEID(s.ca.TrustDomain()))
	return &securitypb.IstioCertificateResponse{CertChain: chain}, nil
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
