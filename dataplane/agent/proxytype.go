package agent

import (
	"fmt"
	"strings"
)

// The proxy types of pilot-agent's `proxy TYPE` and of the first field of an xDS node id
// (Istio's pkg/model NodeType).
const (
	ProxyTypeSidecar  = "sidecar"
	ProxyTypeRouter   = "router"
	ProxyTypeWaypoint = "waypoint"
)

// ParseProxyArgs reads the positional arguments of `meshlab agent`, pilot-agent's
// `proxy TYPE`: none (the type comes from the node id), or "proxy" and a known type.
func ParseProxyArgs(args []string) (string, error) {
	switch {
	case len(args) == 0:
		return "", nil
	case len(args) == 2 && args[0] == "proxy":
		switch args[1] {
		case ProxyTypeSidecar, ProxyTypeRouter, ProxyTypeWaypoint:
			return args[1], nil
		}
		return "", fmt.Errorf("proxy type %q: want %s, %s or %s", args[1], ProxyTypeSidecar, ProxyTypeRouter, ProxyTypeWaypoint)
	}
	return "", fmt.Errorf("arguments %q: want none or \"proxy TYPE\"", args)
}

// nodeType is the type field of the node id ("waypoint" of "waypoint~10.0.0.1~...").
func (c Config) nodeType() string {
	t, _, _ := strings.Cut(c.NodeID, "~")
	return t
}

// proxyType is the proxy's type: ProxyType when set, else the node id's.
func (c Config) proxyType() string {
	if c.ProxyType != "" {
		return c.ProxyType
	}
	return c.nodeType()
}

// checkProxyType refuses a node id whose type is not one pilot-agent knows, or that
// differs from the `proxy TYPE` given (pilot-agent builds the id from that type).
func (c Config) checkProxyType() error {
	if c.NodeID == "" {
		return nil // reported as missing
	}
	switch t := c.nodeType(); {
	case t != ProxyTypeSidecar && t != ProxyTypeRouter && t != ProxyTypeWaypoint:
		return fmt.Errorf("node id %q: type %q is not sidecar, router or waypoint", c.NodeID, t)
	case c.ProxyType != "" && c.ProxyType != t:
		return fmt.Errorf("node id %q: type %q, but the agent runs `proxy %s`", c.NodeID, t, c.ProxyType)
	}
	return nil
}
