// Package discovery is meshlab's xDS server, the part of istiod that talks to proxies: a
// go-control-plane state-of-the-world ADS server on a unix socket (and optionally on
// TCP), serving each sidecar a snapshot generated from the model by controlplane/xds and
// keyed by the proxy's node id, and tracking per proxy and per type which version was
// sent, which was ACKed and the last NACK. It keeps a bounded history of each proxy's
// snapshots with what triggered them, and a semantic Diff of two (history.go, diff.go),
// and can be broken on purpose: delayed or held pushes, a config the proxy NACKs, a stop
// that drops every stream (faults.go).
//
// A Server has one lifecycle: New listens, Run serves until its context ends, then stops
// and removes the socket. Update and Status may be called from any goroutine at any time
// after New.
package discovery
