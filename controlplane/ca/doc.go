// Package ca is the lab's certificate authority, istiod's CA in small: an ECDSA P-256
// root (made per lab, or supplied by the user), or an intermediate plugged in as
// Istio's cacerts Secret (plugged.go: ECDSA or RSA, with its chain and roots), that signs
// workload CSRs into certificates whose only SAN is the pod's SPIFFE ID. It is served as
// Istio's own IstioCertificateService (istio.io/api security/v1alpha1) on the lab's gRPC
// server; callers authenticate with a per-pod bearer token (see Tokens).
//
// # Trust bundle
//
// As in Istio, the CSR response's cert_chain is the leaf, then any intermediates, then
// the root: here the root is the whole trust bundle, one or more self-signed roots at the
// end of the chain (a plugged-in CA sends [leaf, cert-chain.pem..., root-cert.pem], as
// istiod's CreateCertificate). The agent serves the whole chain as its "default" SDS
// secret, as Istio's agent concatenates the response, and the trailing roots as
// "ROOTCA", so it
// learns a new bundle with every certificate it gets; to push a bundle, the lab has every
// agent renew (agent.sock POST /certs/renew). No separate trust-bundle channel exists.
//
// # Root rotation
//
// A rotation (rotate.go) is Istio's cross-signed root rotation in three steps: AddRoot
// puts the new root R2 in the bundle {R1, R2} and has R1 cross-sign R2 (leaves still from
// R1); SwitchSigning makes R2 sign, sending leaves as [leaf, R2 cross-signed by R1], which
// a peer trusting only R1 accepts too; DropOldRoots leaves {R2} and plain [leaf]. The lab
// (lab/carotate.go) has every agent renew after each step, so no pair of pods ever holds
// a certificate the other cannot verify.
//
// SetClockOffset shifts the CA's clock for the certificates it issues, so that faults
// such as expired or not yet valid certificates can be injected.
package ca
