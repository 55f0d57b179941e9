// Package kubeproxy renders and applies the iptables rules kube-proxy writes in iptables
// mode, so that a service VIP works for traffic no sidecar captures: a pod without a
// sidecar, or a sidecar (uid 1337) dialling a VIP itself.
//
// The rules live in the lab's node namespace, where pod traffic to a VIP arrives over the
// pods' default route: nat PREROUTING jumps to KUBE-SERVICES, which sends each VIP:port to
// its KUBE-SVC-<hash> chain, which picks one KUBE-SEP-<hash> chain per connection with
// `-m statistic --mode random --probability 1/n`, which DNATs to the endpoint. The
// connection is marked (KUBE-MARK-MASQ) and masqueraded in KUBE-POSTROUTING, because pods
// share one bridge: without it the endpoint would answer the client directly and the
// reply would bypass the node's conntrack. A service port with no endpoints is rejected in
// the filter table, as kube-proxy does.
//
// Chain names, hashes, rule order and comments follow kubernetes' pkg/proxy/iptables
// (proxier.go) with --masquerade-all, so what a learner sees here matches a node of a real
// cluster. Departures: no NodePort, LoadBalancer, external IP, session affinity or
// firewall chains (the lab has none of them), and the few rules kube-proxy writes without
// a comment carry one here, so the dashboard can explain every rule.
//
// Compute, then apply: Config.Rules and Config.Render are pure and golden-tested; the text
// is applied with netns/capture's Applier (iptables-restore inside the namespace).
package kubeproxy
