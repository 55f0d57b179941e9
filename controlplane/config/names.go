package config

import (
	"fmt"

	"github.com/meshlab/meshlab/controlplane/model"
)

// maxPodName is the longest pod name meshlab accepts: the pod's network namespace is
// "ml-<lab>-<pod key>", and names that long are already hard to read in `ip netns list`.
const maxPodName = 40

// maxPodKey is the longest pod key (model.PodKey: "<name>" in default,
// "<name>.<namespace>" elsewhere): the key names the pod's run directory
// /run/meshlab/<lab>/pods/<key>/, whose unix sockets (agent.sock) must fit Linux's
// 108-byte sun_path with a lab name of 20 characters.
const maxPodKey = 56

// checkPodKey records a problem at field when pod namespace/name's key is too long.
func checkPodKey(p problems, field, namespace, name string) bool {
	if k := model.PodKey(namespace, name); len(k) > maxPodKey {
		p.addf(field, "pod %s/%s: its key %q is %d characters, more than %d (the pod's run directory /run/meshlab/<lab>/pods/<key>/ holds unix sockets, whose paths Linux limits to 108 bytes): shorten the name or the namespace", namespace, name, k, len(k), maxPodKey)
		return false
	}
	return true
}

// checkDNSLabel returns why name is not a DNS-1123 label (lowercase letters, digits and
// '-', starting and ending with a letter or digit, at most max characters), or "".
func checkDNSLabel(name string, limit int) string {
	if name == "" {
		return "is required"
	}
	if len(name) > limit {
		return fmt.Sprintf("%q is %d characters, more than %d", name, len(name), limit)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if alnum || c == '-' && i > 0 && i < len(name)-1 {
			continue
		}
		return fmt.Sprintf("%q is not a DNS-1123 label (lowercase letters, digits and '-', starting and ending with a letter or digit)", name)
	}
	return ""
}

// checkName records a problem at field when name is not a valid DNS-1123 label.
func checkName(p problems, field, name string, limit int) {
	if msg := checkDNSLabel(name, limit); msg != "" {
		p.addf(field, "%s", msg)
	}
}

// checkPort returns why port is not a valid port number, or "".
func checkPort(port int64) string {
	if port < 1 || port > 65535 {
		return fmt.Sprintf("%d is out of range 1-65535", port)
	}
	return ""
}

// sidecarPorts are the ports the sidecar and its agent own inside every pod, as Istio
// reserves them: an app or service using one would collide with the mesh itself.
var sidecarPorts = map[int64]string{
	15000: "the proxy's admin port",
	15001: "the outbound capture port",
	15006: "the inbound capture port",
	15020: "the agent's status port",
	15021: "the health check port",
	15053: "the agent's DNS port",
	15090: "the proxy's Prometheus port",
}

// checkAppPort is checkPort for a port an app listens on (a container port or a target
// port): it must also stay clear of the sidecar's own ports.
func checkAppPort(port int64) string {
	if msg := checkPort(port); msg != "" {
		return msg
	}
	if what, ok := sidecarPorts[port]; ok {
		return fmt.Sprintf("%d is reserved for the sidecar (%s)", port, what)
	}
	return ""
}
