// Package analyze finds Istio's classic configuration mistakes offline, as `istioctl
// analyze` does: a VirtualService routing to a host no Service or ServiceEntry defines, a
// subset no DestinationRule defines, conflicting PeerAuthentications, ports whose name or
// appProtocol Istio cannot classify, Services that select no pod, ambient mode's bad
// input (ambient.go: dataplane-mode labels, pods both injected and ambient, policies
// ztunnel enforces only in part), and the rest of what meshlab's own loader refuses
// (reported as IST0106 SchemaValidationError).
//
// It is pure: files in, findings out. Objects are decoded leniently (an object meshlab
// refuses is still analysed), so one run reports every mistake rather than the first
// file-level error. Findings carry Istio's analyzer codes where one exists (IST0101,
// IST0106, IST0113, IST0118, IST0127) and meshlab codes (ML01xx) for the checks Istio
// has no code for.
//
// Exit code: like istioctl analyze, the command exits 79 when a finding is at or above
// the failure threshold (Error by default), 0 otherwise.
package analyze
