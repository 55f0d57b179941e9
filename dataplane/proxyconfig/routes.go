package proxyconfig

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// RouteFilter is istioctl's route filter: --name (the route configuration's exact
// name); Verbose is its --verbose (default true): one row per route with its match
// and the VirtualService that made it.
type RouteFilter struct {
	Name    string
	Verbose bool
}

// Routes prints the dump's route configurations (dynamic, then the static ones Envoy
// lists for every HCM with an inline route_config) that match f.
func (w Writer) Routes(d *ConfigDump, f RouteFilter, format Format) error {
	routes, err := sortedRoutes(d)
	if err != nil {
		return err
	}
	var shown []*routev3.RouteConfiguration
	for _, r := range routes {
		if f.Name == "" || f.Name == r.GetName() {
			shown = append(shown, r)
		}
	}
	if format != Short {
		b, err := marshalList(shown, format)
		if err != nil {
			return err
		}
		return w.println(b)
	}
	tw := new(tabwriter.Writer).Init(w.Out, 0, 8, 5, ' ', 0)
	if f.Verbose {
		fmt.Fprintln(tw, "NAME\tVHOST NAME\tDOMAINS\tMATCH\tVIRTUAL SERVICE")
	} else {
		fmt.Fprintln(tw, "NAME\tVIRTUAL HOSTS")
	}
	for _, rc := range shown {
		name := rc.GetName()
		if w.withType {
			name = "route/" + name
		}
		if !f.Verbose {
			fmt.Fprintf(tw, "%s\t%d\n", name, len(rc.GetVirtualHosts()))
			continue
		}
		for _, vh := range rc.GetVirtualHosts() {
			for _, r := range vh.GetRoutes() {
				if r.GetRoute().GetCluster() == "PassthroughCluster" {
					continue
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", name, vh.GetName(), describeRouteDomains(vh.GetDomains()),
					describeMatch(r.GetMatch()), describeManagement(r.GetMetadata()))
			}
			if len(vh.GetRoutes()) == 0 {
				fmt.Fprintf(tw, "%s\t%s\t%s\t/*\t404\n", name, vh.GetName(), describeRouteDomains(vh.GetDomains()))
			}
		}
	}
	return tw.Flush()
}

// sortedRoutes returns the dump's route configurations, dynamic then static, in
// istioctl's order: numeric names ascending among themselves. istioctl's comparison
// treats a pair with a non-numeric name as unordered and sorts with sort.Slice, so
// where the rest lands is sort.Slice's business; the same comparison through the same
// sort keeps the rows where istioctl puts them.
func sortedRoutes(d *ConfigDump) ([]*routev3.RouteConfiguration, error) {
	dump, ok, err := section(d, &adminv3.RoutesConfigDump{})
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errNoSection(dump)
	}
	routes, err := unpackEach([]*routev3.RouteConfiguration(nil), dump.GetDynamicRouteConfigs(), (*adminv3.RoutesConfigDump_DynamicRouteConfig).GetRouteConfig, "route configuration")
	if err != nil {
		return nil, err
	}
	routes, err = unpackEach(routes, dump.GetStaticRouteConfigs(), (*adminv3.RoutesConfigDump_StaticRouteConfig).GetRouteConfig, "static route configuration")
	if err != nil {
		return nil, err
	}
	if len(routes) == 0 {
		return nil, noneFound("routes")
	}
	sort.Slice(routes, func(i, j int) bool {
		in, err := strconv.Atoi(routes[i].GetName())
		if err != nil {
			return false
		}
		jn, err := strconv.Atoi(routes[j].GetName())
		if err != nil {
			return false
		}
		return in < jn
	})
	return routes, nil
}

// describeRouteDomains is istioctl's DOMAINS: the domains without a port, short forms
// instead of their .svc and .svc.cluster.local expansions, at most two then "+ N more...".
func describeRouteDomains(domains []string) string {
	switch len(domains) {
	case 0:
		return ""
	case 1:
		return domains[0]
	}
	var withoutPort []string
	for _, d := range domains {
		if !strings.Contains(d, ":") {
			withoutPort = append(withoutPort, d)
		} else if strings.Count(d, ":") > 2 && strings.HasSuffix(d, "]") {
			withoutPort = append(withoutPort, d) // a bare IPv6 address
		}
	}
	withoutPort = unexpandDomains(withoutPort)
	const maximum = 2
	if len(withoutPort) > maximum {
		return fmt.Sprintf("%s + %d more...", strings.Join(withoutPort[:maximum], ", "), len(withoutPort)-maximum)
	}
	return strings.Join(withoutPort, ", ")
}

func unexpandDomains(domains []string) []string {
	unique := map[string]bool{}
	for _, d := range domains {
		unique[d] = true
	}
	drop := map[string]bool{}
	for _, h := range domains {
		if s := strings.TrimSuffix(h, ".svc.cluster.local"); s != h && unique[s] {
			drop[h] = true
		}
		if s := strings.TrimSuffix(h, ".svc"); s != h && unique[s] {
			drop[h] = true
		}
	}
	out := make([]string, 0, len(domains))
	for _, h := range domains {
		if !drop[h] {
			out = append(out, h)
		}
	}
	return out
}

// RouteNames returns the names of the dump's route configurations, sorted and without
// repeats, for a message about a --name that names none.
func RouteNames(d *ConfigDump) ([]string, error) {
	routes, err := sortedRoutes(d)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, r := range routes {
		if !seen[r.GetName()] {
			seen[r.GetName()] = true
			out = append(out, r.GetName())
		}
	}
	sort.Strings(out)
	return out, nil
}
