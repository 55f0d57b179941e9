package capture

import (
	"fmt"
	"strings"
)

// KubeDNSRules returns the nat rules of a pod without a sidecar: its DNS queries (UDP and
// TCP port 53, whatever nameserver its resolv.conf names) go to the cluster DNS that
// listens on the pod's own loopback at port, as every Kubernetes pod resolves Services
// through cluster DNS, sidecar or not. A pod with a sidecar has Render's rules instead,
// whose DNS goes to its agent.
func KubeDNSRules(port uint16) string {
	var b strings.Builder
	b.WriteString("*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n")
	for _, proto := range []string{"udp", "tcp"} {
		fmt.Fprintf(&b, "-A OUTPUT -p %s --dport 53 -m comment --comment \"cluster DNS: the pod's %s queries go to the lab's kube-dns on 127.0.0.1:%d\" -j REDIRECT --to-ports %d\n",
			proto, strings.ToUpper(proto), port, port)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}
