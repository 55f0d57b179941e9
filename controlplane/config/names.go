package config

import "fmt"

// maxPodName is the longest pod name meshlab accepts: the pod's network namespace is
// "ml-<lab>-<pod>", and names that long are already hard to read in `ip netns list`.
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
