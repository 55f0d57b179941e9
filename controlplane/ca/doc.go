// Package ca is the lab's certificate authority, istiod's CA in small: an ECDSA P-256
// root (made per lab, or supplied by the user like Istio's plugged-in cacerts) that signs
// workload CSRs into certificates whose only SAN is the pod's SPIFFE ID. It is served as
// Istio's own IstioCertificateService (istio.io/api security/v1alpha1) on the lab's gRPC
// server; callers authenticate with a per-pod bearer token (see Tokens).
package ca
