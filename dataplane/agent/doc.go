// Package agent is meshlab's pilot-agent: one per pod, started by the lab process inside
// the pod's network namespace. It writes the Envoy bootstrap for each epoch, runs the data
// plane (real envoy, or `meshlab proxy` when envoy is not installed) as uid 1337, follows
// each epoch's state through the admin API, serves pod readiness on the status port
// (15020), answers DNS for the lab's service names on 127.0.0.1:15053 from a name table
// long-polled from the lab API, and serves agent.sock (status and the proxy's admin API)
// to the lab process, which lives outside the pod's namespace. agent.sock's wire types,
// the status codes it answers refusals with and the client its callers use are in
// dataplane/agent/agentapi, so that talking to an agent never means importing it.
//
// With a CA token it also gets the workload certificate (csr.go, certs.go) and serves it
// over SDS (sds.go) as "default" and "ROOTCA". The CA's chain ends with the trust bundle
// (the self-signed roots), which becomes ROOTCA, so a renewal also brings a new bundle;
// agent.sock's /certs endpoints (certsock.go) renew now, which is how the lab pushes a
// bundle during a root rotation, and pause or resume renewal for fault injection.
//
// The agent knows the data plane only through its command line, its bootstrap and its
// admin API, and the lab only through sockets: it imports neither lab/, web/ nor
// controlplane/.
package agent
