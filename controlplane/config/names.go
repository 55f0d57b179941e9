package config

import (
	"fmt"
)

// maxPodName is the longest pod name meshlab accepts: the pod's network namespace is
// "ml-<lab>-<pod key>", and names that long are already hard to read in `ip netns list`.
// A pod's key (name and namespace) has no limit of its own: a namespace may be as long as
// Kubernetes allows (63), the network namespace's name still fits a file name, and the
// run directory's name is cut with a hash when long (lab.Paths.PodDir).
const maxPodName = 40

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
