package trace

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"strings"
)

// dumpMetadata is an xDS resource's metadata; the "istio" filter metadata's config is
// the path of the object it was generated from, and a cluster's services are the
// Services it sends to (istiod sets config on a cluster only for a DestinationRule).
type dumpMetadata struct {
	FilterMetadata struct {
		Istio struct {
			Config   string `json:"config"`
			Services []struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"services"`
		} `json:"istio"`
	} `json:"filter_metadata"`
}

// origin is the path of the object behind the resource: its config, else (a cluster no
// DestinationRule shapes) its first Service's.
func (m dumpMetadata) origin() string {
	im := m.FilterMetadata.Istio
	if im.Config != "" || len(im.Services) == 0 {
		return im.Config
	}
	s := im.Services[0]
	return "/apis/v1/namespaces/" + s.Namespace + "/services/" + s.Name
}

type dumpFilterChain struct {
	Name  string `json:"name"`
	Match struct {
		DestinationPort   *uint32 `json:"destination_port"`
		TransportProtocol string  `json:"transport_protocol"`
	} `json:"filter_chain_match"`
	Metadata dumpMetadata `json:"metadata"`
	Filters  []struct {
		TypedConfig struct {
			RDS struct {
				RouteConfigName string `json:"route_config_name"`
			} `json:"rds"`
			RouteConfig *dumpRouteConfig `json:"route_config"`
		} `json:"typed_config"`
	} `json:"filters"`
}

type dumpListener struct {
	Name    string `json:"name"`
	Address struct {
		SocketAddress struct {
			Address   string `json:"address"`
			PortValue uint32 `json:"port_value"`
		} `json:"socket_address"`
	} `json:"address"`
	Metadata     dumpMetadata      `json:"metadata"`
	FilterChains []dumpFilterChain `json:"filter_chains"`
}

type dumpRoute struct {
	Name  string `json:"name"`
	Match struct {
		Prefix    *string `json:"prefix"`
		Path      *string `json:"path"`
		SafeRegex *struct {
			Regex string `json:"regex"`
		} `json:"safe_regex"`
		Headers         []json.RawMessage `json:"headers"`
		QueryParameters []json.RawMessage `json:"query_parameters"`
	} `json:"match"`
	Route *struct {
		Cluster string `json:"cluster"`
	} `json:"route"`
	Metadata dumpMetadata `json:"metadata"`
}

type dumpVirtualHost struct {
	Name     string       `json:"name"`
	Domains  []string     `json:"domains"`
	Routes   []dumpRoute  `json:"routes"`
	Metadata dumpMetadata `json:"metadata"`
}

type dumpRouteConfig struct {
	Name         string            `json:"name"`
	VirtualHosts []dumpVirtualHost `json:"virtual_hosts"`
	// IgnorePort is ignore_port_in_host_matching: the Host header's port is dropped
	// before domains are matched (Istio's sidecar routes set it).
	IgnorePort bool `json:"ignore_port_in_host_matching"`
}

type dumpCluster struct {
	Name     string       `json:"name"`
	Metadata dumpMetadata `json:"metadata"`
}

// proxyDump is the part of a proxy's /config_dump a trace reads.
type proxyDump struct {
	listeners []dumpListener
	routes    map[string]dumpRouteConfig
	clusters  map[string]dumpCluster
}

// readProxyDump reads a proxy's /config_dump through its agent.
func readProxyDump(ctx context.Context, deps Deps, pod string) (proxyDump, error) {
	body, err := deps.AgentGet(ctx, pod, "/admin/config_dump")
	if err != nil {
		return proxyDump{}, err
	}
	defer body.Close()
	var raw struct {
		Configs []json.RawMessage `json:"configs"`
	}
	if err := json.NewDecoder(body).Decode(&raw); err != nil {
		return proxyDump{}, fmt.Errorf("decode config_dump: %w", err)
	}
	d := proxyDump{routes: map[string]dumpRouteConfig{}, clusters: map[string]dumpCluster{}}
	for _, c := range raw.Configs {
		var one struct {
			StaticListeners  []struct{ Listener dumpListener } `json:"static_listeners"`
			DynamicListeners []struct {
				ActiveState *struct{ Listener dumpListener } `json:"active_state"`
			} `json:"dynamic_listeners"`
			DynamicRoutes []struct {
				RouteConfig dumpRouteConfig `json:"route_config"`
			} `json:"dynamic_route_configs"`
			StaticClusters  []struct{ Cluster dumpCluster } `json:"static_clusters"`
			DynamicClusters []struct{ Cluster dumpCluster } `json:"dynamic_active_clusters"`
		}
		if json.Unmarshal(c, &one) != nil {
			continue
		}
		for _, l := range one.StaticListeners {
			d.listeners = append(d.listeners, l.Listener)
		}
		for _, l := range one.DynamicListeners {
			if l.ActiveState != nil { // a rejected listener has only an error_state
				d.listeners = append(d.listeners, l.ActiveState.Listener)
			}
		}
		for _, r := range one.DynamicRoutes {
			d.routes[r.RouteConfig.Name] = r.RouteConfig
		}
		for _, c := range append(one.StaticClusters, one.DynamicClusters...) {
			d.clusters[c.Cluster.Name] = c.Cluster
		}
	}
	return d, nil
}

// listener returns the named listener.
func (d proxyDump) listener(name string) (dumpListener, bool) {
	for _, l := range d.listeners {
		if l.Name == name {
			return l, true
		}
	}
	return dumpListener{}, false
}

// outboundListener returns the listener virtualOutbound hands a connection to ip:port
// to, as Envoy picks it: one on that exact address, else one on 0.0.0.0 with that port,
// else virtualOutbound itself.
func (d proxyDump) outboundListener(ip string, port uint16) (dumpListener, bool) {
	var wild *dumpListener
	for i, l := range d.listeners {
		sa := l.Address.SocketAddress
		if sa.PortValue != uint32(port) {
			continue
		}
		if sa.Address == ip {
			return l, true
		}
		if sa.Address == "0.0.0.0" && wild == nil {
			wild = &d.listeners[i]
		}
	}
	if wild != nil {
		return *wild, true
	}
	return d.listener("virtualOutbound")
}

// inboundChain returns the virtualInbound chain a connection to port with the given
// transport ("tls" or "raw_buffer") matched.
func (d proxyDump) inboundChain(port uint16, transport string) (dumpFilterChain, bool) {
	l, ok := d.listener("virtualInbound")
	if !ok {
		return dumpFilterChain{}, false
	}
	for _, fc := range l.FilterChains {
		m := fc.Match
		if m.DestinationPort != nil && *m.DestinationPort == uint32(port) && (m.TransportProtocol == "" || m.TransportProtocol == transport) {
			return fc, true
		}
	}
	return dumpFilterChain{}, false
}

// routeFor returns the virtual host and route that a request for host and path, with no
// special headers or query, matches in route configuration rc: the first virtual host with
// an exact (or "*") domain, then its first route whose path match fits.
func routeFor(rc dumpRouteConfig, host, path string) (dumpVirtualHost, dumpRoute, bool) {
	host = strings.ToLower(host)
	if h, _, err := net.SplitHostPort(host); err == nil && rc.IgnorePort {
		host = h
	}
	var vh *dumpVirtualHost
	for i, v := range rc.VirtualHosts {
		for _, dom := range v.Domains {
			if strings.EqualFold(dom, host) {
				vh = &rc.VirtualHosts[i]
				break
			}
		}
		if vh != nil {
			break
		}
	}
	if vh == nil {
		for i, v := range rc.VirtualHosts {
			for _, dom := range v.Domains {
				if dom == "*" {
					vh = &rc.VirtualHosts[i]
				}
			}
			if vh != nil {
				break
			}
		}
	}
	if vh == nil {
		return dumpVirtualHost{}, dumpRoute{}, false
	}
	for _, r := range vh.Routes {
		m := r.Match
		if len(m.Headers) > 0 || len(m.QueryParameters) > 0 {
			continue
		}
		switch {
		case m.Prefix != nil && strings.HasPrefix(path, *m.Prefix),
			m.Path != nil && path == *m.Path:
			return *vh, r, true
		case m.SafeRegex != nil:
			if re, err := regexp.Compile("^(?:" + m.SafeRegex.Regex + ")$"); err == nil && re.MatchString(path) {
				return *vh, r, true
			}
		}
	}
	return *vh, dumpRoute{}, false
}
