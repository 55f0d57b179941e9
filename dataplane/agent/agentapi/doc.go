// Package agentapi is the pod agent's API as its callers see it: the wire types of
// agent.sock (Status, ProxySettings, CertStatus, RestartResult, ...) and of the name
// table the agent long-polls from the lab, the sentinel errors its status codes stand
// for, and the one Client over the agent's unix socket. The agent (dataplane/agent)
// serves these types; the lab, the lab runner, the dashboard's API and the CLI read them
// through here, without importing the agent and what it carries (func-e, the DNS
// server, the xDS client).
package agentapi
