package proxyconfig

import (
	"fmt"
	"strings"
	"text/tabwriter"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
)

// Bootstrap prints the proxy's bootstrap: as JSON/YAML the whole bootstrap section, as
// a table (-o short) the Istio and Envoy versions the node reports.
func (w Writer) Bootstrap(d *ConfigDump, format Format) error {
	dump, ok, err := section(d, &adminv3.BootstrapConfigDump{})
	if err != nil {
		return err
	}
	if !ok {
		return errNoSection(dump)
	}
	if format != Short {
		b, err := marshalOne(dump, format)
		if err != nil {
			return err
		}
		return w.println(b)
	}
	return w.bootstrapSummary(dump)
}

func (w Writer) bootstrapSummary(dump *adminv3.BootstrapConfigDump) error {
	node := dump.GetBootstrap().GetNode()
	md := node.GetMetadata().GetFields()
	istioVersion := md["ISTIO_VERSION"].GetStringValue()
	sha := md["ISTIO_PROXY_SHA"].GetStringValue()
	if parts := strings.Split(sha, ":"); len(parts) > 1 {
		sha = parts[1]
	}
	bv := node.GetUserAgentBuildVersion()
	v := bv.GetVersion()
	var envoy strings.Builder
	fmt.Fprintf(&envoy, "%d.%d.%d", v.GetMajorNumber(), v.GetMinorNumber(), v.GetPatch())
	bmd := bv.GetMetadata().GetFields()
	for _, k := range []struct{ key, sep string }{{"build.label", "-"}, {"revision.status", "/"}, {"build.type", "/"}, {"ssl.version", "/"}} {
		if val, ok := bmd[k.key]; ok {
			envoy.WriteString(k.sep + val.GetStringValue())
		}
	}
	tw := tabwriter.NewWriter(w.Out, 0, 8, 1, ' ', 0)
	if istioVersion != "" {
		fmt.Fprintf(tw, "Istio Version:\t%s\n", istioVersion)
	}
	if sha != "" {
		fmt.Fprintf(tw, "Istio Proxy Version:\t%s\n", sha)
	}
	fmt.Fprintf(tw, "Envoy Version:\t%s\n", envoy.String())
	return tw.Flush()
}

// AllFilter is the filters `all` applies to each of its tables, as istioctl's `all`:
// --port filters clusters, listeners and endpoints alike, --address listeners and
// endpoints.
type AllFilter struct {
	Cluster  ClusterFilter
	Listener ListenerFilter
	Route    RouteFilter
	Endpoint EndpointFilter
	// WithHeaders prints a "------ CLUSTER INFO ------" line before each table.
	WithHeaders bool
}

// All prints every table of the dump, each name prefixed with its type (istioctl's
// `proxy-config all`), or the whole dump as JSON/YAML. Its endpoints are the dump's EDS
// section (the `endpoints` verb reads /clusters instead), as istioctl's.
func (w Writer) All(d *ConfigDump, f AllFilter, format Format) error {
	if format != Short {
		b := d.raw
		if format == YAML {
			var err error
			if b, err = yamlOf(b); err != nil {
				return err
			}
		}
		return w.println(b)
	}
	w.withType = true
	steps := []struct {
		header string
		print  func() error
	}{
		{"BOOTSTRAP INFO", func() error {
			dump, ok, err := section(d, &adminv3.BootstrapConfigDump{})
			if err != nil {
				return err
			}
			if !ok {
				return errNoSection(dump)
			}
			return w.bootstrapSummary(dump)
		}},
		{"CLUSTER INFO", func() error { return w.Clusters(d, f.Cluster, Short) }},
		{"LISTENER INFO", func() error { return w.Listeners(d, f.Listener, Short) }},
		{"ROUTE INFO", func() error { return w.Routes(d, f.Route, Short) }},
		{"SECRET INFO", func() error {
			dump, ok, err := section(d, &adminv3.SecretsConfigDump{})
			if err != nil {
				return err
			}
			if !ok {
				return errNoSection(dump)
			}
			return w.secretSummary(dump)
		}},
		{"ENDPOINTS INFO", func() error { return w.edsSummary(d, f.Endpoint) }},
	}
	for i, s := range steps {
		if i > 0 {
			fmt.Fprintln(w.Out)
		}
		if f.WithHeaders {
			fmt.Fprintf(w.Out, "------ %s ------\n\n", s.header)
		}
		if err := s.print(); err != nil {
			return err
		}
	}
	return nil
}
