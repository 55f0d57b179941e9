package proxyconfig

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"text/tabwriter"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

const (
	httpConnectionManager = "envoy.filters.network.http_connection_manager"
	tcpProxy              = "envoy.filters.network.tcp_proxy"
	blackHoleCluster      = "BlackHoleCluster"
)

// ListenerType is istioctl's listener classification.
type ListenerType string

// The listener types istioctl's --type filter compares with (case-insensitively).
const (
	HTTP        ListenerType = "HTTP"
	TCP         ListenerType = "TCP"
	HTTPAndTCP  ListenerType = "HTTP+TCP"
	UnknownType ListenerType = "UNKNOWN"
)

// ListenerFilter is istioctl's listener filter: --address, --port, --type; Verbose is
// its --verbose (default true): one row per filter chain with MATCH and DESTINATION.
type ListenerFilter struct {
	Address string
	Port    uint32
	Type    ListenerType
	Verbose bool
}

// Validate checks the filter's fields as a user typed them.
func (f ListenerFilter) Validate() error {
	switch ListenerType(strings.ToUpper(string(f.Type))) {
	case "", HTTP, TCP, HTTPAndTCP, UnknownType:
		return nil
	}
	return fmt.Errorf("--type %q: want HTTP, TCP, HTTP+TCP or UNKNOWN", f.Type)
}

func (f ListenerFilter) match(l *listenerv3.Listener) bool {
	if f.Address != "" {
		found := false
		for _, a := range append(additionalAddresses(l), listenerAddress(l)) {
			if strings.EqualFold(a, f.Address) {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	if f.Port != 0 && listenerPort(l) != f.Port {
		return false
	}
	if f.Type != "" && !strings.EqualFold(string(listenerType(l)), string(f.Type)) {
		return false
	}
	return true
}

// Listeners prints the dump's active listeners that match f, sorted by port, address
// and type.
func (w Writer) Listeners(d *ConfigDump, f ListenerFilter, format Format) error {
	listeners, err := listListeners(d)
	if err != nil {
		return err
	}
	var shown []*listenerv3.Listener
	for _, l := range listeners {
		if f.match(l) {
			shown = append(shown, l)
		}
	}
	if format != Short {
		b, err := marshalList(shown, format)
		if err != nil {
			return err
		}
		return w.println(b)
	}
	sort.Slice(shown, func(i, j int) bool {
		if pi, pj := listenerPort(shown[i]), listenerPort(shown[j]); pi != pj {
			return pi < pj
		}
		if ai, aj := listenerAddress(shown[i]), listenerAddress(shown[j]); ai != aj {
			return ai < aj
		}
		return listenerType(shown[i]) < listenerType(shown[j])
	})
	tw := new(tabwriter.Writer).Init(w.Out, 0, 8, 1, ' ', 0)
	header := "ADDRESSES\tPORT"
	if w.withType {
		header = "NAME\t" + header
	}
	if f.Verbose {
		header += "\tMATCH\tDESTINATION"
	} else {
		header += "\tTYPE"
	}
	fmt.Fprintln(tw, header)
	for _, l := range shown {
		addrs := strings.Join(append([]string{listenerAddress(l)}, additionalAddresses(l)...), ",")
		port := listenerPort(l)
		prefix := ""
		if w.withType {
			prefix = "listener/" + l.GetName() + "\t"
		}
		if !f.Verbose {
			fmt.Fprintf(tw, "%s%s\t%d\t%s\n", prefix, addrs, port, listenerType(l))
			continue
		}
		matches := chainMatches(l)
		sort.Slice(matches, func(i, j int) bool { return matches[i].destination > matches[j].destination })
		for _, m := range matches {
			fmt.Fprintf(tw, "%s%s\t%d\t%s\t%s\n", prefix, addrs, port, m.match, m.destination)
		}
	}
	return tw.Flush()
}

// listListeners returns the dump's active dynamic listeners, then its static ones.
func listListeners(d *ConfigDump) ([]*listenerv3.Listener, error) {
	dump, ok, err := section(d, &adminv3.ListenersConfigDump{})
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("listener dump: %w", errNoSection(dump))
	}
	activeListener := func(l *adminv3.ListenersConfigDump_DynamicListener) *anypb.Any {
		return l.GetActiveState().GetListener()
	}
	out, err := unpackEach([]*listenerv3.Listener(nil), dump.GetDynamicListeners(), activeListener, "listener")
	if err != nil {
		return nil, err
	}
	out, err = unpackEach(out, dump.GetStaticListeners(), (*adminv3.ListenersConfigDump_StaticListener).GetListener, "static listener")
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, noneFound("listeners")
	}
	return out, nil
}

func filterChains(l *listenerv3.Listener) []*listenerv3.FilterChain {
	res := l.GetFilterChains()
	if l.GetDefaultFilterChain() != nil {
		res = append(res, l.GetDefaultFilterChain())
	}
	return res
}

// listenerType classifies a listener as istioctl does: by its chains' HCM and
// tcp_proxy filters (a tcp_proxy to BlackHoleCluster does not count).
func listenerType(l *listenerv3.Listener) ListenerType {
	nHTTP, nTCP := 0, 0
	for _, fc := range filterChains(l) {
		for _, f := range fc.GetFilters() {
			switch f.GetName() {
			case httpConnectionManager:
				nHTTP++
			case tcpProxy:
				if !strings.Contains(string(f.GetTypedConfig().GetValue()), blackHoleCluster) {
					nTCP++
				}
			}
		}
	}
	switch {
	case nHTTP > 0 && nTCP == 0:
		return HTTP
	case nHTTP > 0:
		return HTTPAndTCP
	case nTCP > 0:
		return TCP
	}
	return UnknownType
}

func listenerAddress(l *listenerv3.Listener) string {
	if sa := l.GetAddress().GetSocketAddress(); sa != nil {
		return sa.GetAddress()
	}
	if p := l.GetAddress().GetPipe(); p != nil {
		return p.GetPath()
	}
	return ""
}

func additionalAddresses(l *listenerv3.Listener) []string {
	var out []string
	for _, a := range l.GetAdditionalAddresses() {
		out = append(out, a.GetAddress().GetSocketAddress().GetAddress())
	}
	return out
}

func listenerPort(l *listenerv3.Listener) uint32 {
	return l.GetAddress().GetSocketAddress().GetPortValue()
}

type chainMatch struct{ match, destination string }

func chainMatches(l *listenerv3.Listener) []chainMatch {
	fcs := filterChains(l)
	out := make([]chainMatch, 0, len(fcs))
	for _, fc := range fcs {
		out = append(out, chainMatch{match: describeChainMatch(fc.GetFilterChainMatch()), destination: destination(fc.GetFilters())})
	}
	return out
}

var (
	plaintextHTTPALPNs = []string{"http/1.0", "http/1.1", "h2c"}
	istioHTTPPlaintext = []string{"istio", "istio-http/1.0", "istio-http/1.1", "istio-h2"}
	httpTLS            = []string{"http/1.0", "http/1.1", "h2c", "istio-http/1.0", "istio-http/1.1", "istio-h2"}
	tcpTLS             = []string{"istio-peer-exchange", "istio"}

	// alpnNames are istioctl's names for the ALPN lists Istio's chains match on; the
	// lists are distinct, so the order of the lookup does not matter.
	alpnNames = []struct {
		name  string
		alpns []string
	}{
		{"App: HTTP TLS", httpTLS},
		{"App: Istio HTTP Plain", istioHTTPPlaintext},
		{"App: TCP TLS", tcpTLS},
		{"App: HTTP", plaintextHTTPALPNs},
	}
)

// describeChainMatch is istioctl's MATCH column: SNI, transport, ALPN (named when it is
// one of Istio's lists), destination prefix and port; ALL when the match is empty.
func describeChainMatch(m *listenerv3.FilterChainMatch) string {
	if m == nil {
		m = &listenerv3.FilterChainMatch{}
	}
	var descrs []string
	if len(m.GetServerNames()) > 0 {
		descrs = append(descrs, "SNI: "+strings.Join(m.GetServerNames(), ","))
	}
	if m.GetTransportProtocol() != "" {
		descrs = append(descrs, "Trans: "+m.GetTransportProtocol())
	}
	if alpns := m.GetApplicationProtocols(); len(alpns) > 0 {
		found := false
		for _, n := range alpnNames {
			if reflect.DeepEqual(alpns, n.alpns) {
				descrs = append(descrs, n.name)
				found = true
				break
			}
		}
		if !found {
			descrs = append(descrs, "App: "+strings.Join(alpns, ","))
		}
	}
	port := ""
	if m.GetDestinationPort() != nil {
		port = fmt.Sprintf(":%d", m.GetDestinationPort().GetValue())
	}
	if len(m.GetPrefixRanges()) > 0 {
		var pf []string
		for _, p := range m.GetPrefixRanges() {
			pf = append(pf, fmt.Sprintf("%s/%d", p.GetAddressPrefix(), p.GetPrefixLen().GetValue()))
		}
		descrs = append(descrs, "Addr: "+strings.Join(pf, ",")+port)
	} else if port != "" {
		descrs = append(descrs, "Addr: *"+port)
	}
	if len(descrs) == 0 {
		return "ALL"
	}
	return strings.Join(descrs, "; ")
}

// destination is istioctl's DESTINATION column: the HCM's route (RDS name or inline
// routes) or the tcp_proxy's cluster.
func destination(filters []*listenerv3.Filter) string {
	for _, f := range filters {
		switch f.GetName() {
		case httpConnectionManager:
			hcm, err := unpack(f.GetTypedConfig(), &hcmv3.HttpConnectionManager{})
			if err != nil {
				return err.Error()
			}
			if rc := hcm.GetRouteConfig(); rc != nil {
				return describeRouteConfig(rc)
			}
			if n := hcm.GetRds().GetRouteConfigName(); n != "" {
				return "Route: " + n
			}
			return "HTTP"
		case tcpProxy:
			if strings.Contains(string(f.GetTypedConfig().GetValue()), blackHoleCluster) {
				continue
			}
			tp, err := unpack(f.GetTypedConfig(), &tcpv3.TcpProxy{})
			if err != nil {
				return err.Error()
			}
			if strings.Contains(tp.GetCluster(), "Cluster") {
				return tp.GetCluster()
			}
			return "Cluster: " + tp.GetCluster()
		}
	}
	return "Non-HTTP/Non-TCP"
}

func describeRouteConfig(rc *routev3.RouteConfiguration) string {
	if c := matchAllCluster(rc); c != "" {
		return c
	}
	var vhosts []string
	for _, vh := range rc.GetVirtualHosts() {
		if d := describeDomains(vh); d == "" {
			vhosts = append(vhosts, describeRoutes(vh))
		} else {
			vhosts = append(vhosts, d+" "+describeRoutes(vh))
		}
	}
	return "Inline Route: " + strings.Join(vhosts, "; ")
}

// matchAllCluster returns the cluster of a route configuration that sends everything
// ("*", prefix "/") to one cluster, else "".
func matchAllCluster(rc *routev3.RouteConfiguration) string {
	if len(rc.GetVirtualHosts()) != 1 {
		return ""
	}
	vh := rc.GetVirtualHosts()[0]
	if !reflect.DeepEqual(vh.GetDomains(), []string{"*"}) || len(vh.GetRoutes()) != 1 {
		return ""
	}
	r := vh.GetRoutes()[0]
	if r.GetMatch().GetPrefix() != "/" {
		return ""
	}
	c := r.GetRoute().GetCluster()
	if c == "" {
		return ""
	}
	if strings.Contains(c, "Cluster") {
		return c
	}
	return "Cluster: " + c
}

func describeDomains(vh *routev3.VirtualHost) string {
	if len(vh.GetDomains()) == 1 && vh.GetDomains()[0] == "*" {
		return ""
	}
	return strings.Join(vh.GetDomains(), "/")
}

func describeRoutes(vh *routev3.VirtualHost) string {
	routes := make([]string, 0, len(vh.GetRoutes()))
	for _, r := range vh.GetRoutes() {
		routes = append(routes, describeMatch(r.GetMatch()))
	}
	return strings.Join(routes, ", ")
}

// describeMatch is istioctl's MATCH of a route: prefix, path-separated prefix, path,
// regex (headers are not shown).
func describeMatch(m *routev3.RouteMatch) string {
	var conds []string
	if m.GetPrefix() != "" {
		conds = append(conds, m.GetPrefix()+"*")
	}
	if m.GetPathSeparatedPrefix() != "" {
		conds = append(conds, "PathPrefix:"+m.GetPathSeparatedPrefix())
	}
	if m.GetPath() != "" {
		conds = append(conds, m.GetPath())
	}
	if m.GetSafeRegex() != nil {
		conds = append(conds, "regex "+m.GetSafeRegex().GetRegex())
	}
	return strings.Join(conds, " ")
}
