package proxy

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshlab/meshlab/dataplane/proxy/admin"
	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/envoylog"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

// adminBackend adapts the Server to admin.Backend.
type adminBackend struct{ s *Server }

var _ admin.Backend = adminBackend{}

// ServerInfo returns Envoy's /server_info.
func (b adminBackend) ServerInfo() *adminv3.ServerInfo { return b.s.ServerInfo() }

// State returns the server's state alone (GET /ready).
func (b adminBackend) State() adminv3.ServerInfo_State { return b.s.State() }

// ServerInfo returns Envoy's /server_info message.
func (s *Server) ServerInfo() *adminv3.ServerInfo {
	up := durationpb.New(time.Since(s.start).Truncate(time.Second))
	s.mu.Lock()
	upAll := durationpb.New(time.Since(s.startAll).Truncate(time.Second))
	s.mu.Unlock()
	o := s.opts
	mode := adminv3.CommandLineOptions_Serve
	switch o.Mode {
	case ModeValidate:
		mode = adminv3.CommandLineOptions_Validate
	case ModeInitOnly:
		mode = adminv3.CommandLineOptions_InitOnly
	}
	ipv := adminv3.CommandLineOptions_v4
	if o.LocalAddressIPVersion == "v6" {
		ipv = adminv3.CommandLineOptions_v6
	}
	drain := adminv3.CommandLineOptions_Gradual
	if o.DrainStrategy == DrainImmediate {
		drain = adminv3.CommandLineOptions_Immediate
	}
	return &adminv3.ServerInfo{
		Version:            Version,
		State:              s.State(),
		UptimeCurrentEpoch: up,
		UptimeAllEpochs:    upAll,
		HotRestartVersion:  s.hotRestartVersion(),
		CommandLineOptions: &adminv3.CommandLineOptions{
			BaseId:                   uint64(o.BaseID),
			UseDynamicBaseId:         o.UseDynamicBaseID,
			BaseIdPath:               o.BaseIDPath,
			Concurrency:              o.Concurrency,
			ConfigPath:               o.ConfigPath,
			ConfigYaml:               o.ConfigYAML,
			AllowUnknownStaticFields: o.AllowUnknownStaticFields,
			AdminAddressPath:         o.AdminAddressPath,
			LocalAddressIpVersion:    ipv,
			LogLevel:                 o.LogLevelName,
			ComponentLogLevel:        o.ComponentLogLevel,
			LogFormat:                o.LogFormat,
			LogPath:                  o.LogPath,
			ServiceCluster:           o.ServiceCluster,
			ServiceNode:              o.ServiceNode,
			ServiceZone:              o.ServiceZone,
			DrainTime:                durationpb.New(o.DrainTime),
			DrainStrategy:            drain,
			ParentShutdownTime:       durationpb.New(o.ParentShutdownTime),
			Mode:                     mode,
			DisableHotRestart:        o.DisableHotRestart,
			RestartEpoch:             o.RestartEpoch,
		},
		Node: proto.Clone(s.node).(*nodeMsg),
	}
}

func (b adminBackend) ConfigDump(includeEDS bool) *adminv3.ConfigDump {
	return b.s.ConfigDump(includeEDS)
}

func (b adminBackend) Stats() *stats.Store {
	b.s.refreshServerStats()
	return b.s.stats
}

func (b adminBackend) Quit() {
	b.s.log.Info("shutting down by request: /quitquitquit")
	b.s.Quit()
}

func (b adminBackend) SetHealthCheckFailed(failed bool) {
	b.s.healthFailed.Store(failed)
	b.s.refreshServerStats()
}

func (b adminBackend) DrainListeners(inboundOnly, graceful, skipExit bool) {
	b.s.drainListeners(inboundOnly, graceful, skipExit)
}

// Logging implements POST /logging: ?level=<l>, ?paths=a:l,b:l or ?<logger>=<l>.
func (b adminBackend) Logging(q map[string][]string) (string, error) {
	lv := b.s.levels
	for key, vals := range q {
		val := ""
		if len(vals) > 0 {
			val = vals[0]
		}
		switch key {
		case "level":
			l, err := envoylog.ParseLevel(val)
			if err != nil {
				return "", err
			}
			lv.SetAll(l)
		case "paths":
			levels, err := envoylog.ParseComponentLevels(val)
			if err != nil {
				return "", err
			}
			for name, l := range levels {
				if err := lv.Set(name, l); err != nil {
					return "", err
				}
			}
		default:
			l, err := envoylog.ParseLevel(val)
			if err != nil {
				return "", err
			}
			if err := lv.Set(key, l); err != nil {
				return "", err
			}
		}
	}
	return lv.Render(), nil
}

// WriteClusters writes Envoy's /clusters text form.
func (b adminBackend) WriteClusters(w io.Writer) {
	var sb strings.Builder
	for _, c := range b.s.clusters.All() {
		n := c.Name()
		fmt.Fprintf(&sb, "%s::observability_name::%s\n", n, n)
		for _, prio := range []string{"default_priority", "high_priority"} {
			th := cluster.DefaultThresholds
			if prio == "default_priority" {
				th = c.Breakers()
			}
			fmt.Fprintf(&sb, "%s::%s::max_connections::%d\n%s::%s::max_pending_requests::%d\n%s::%s::max_requests::%d\n%s::%s::max_retries::%d\n",
				n, prio, th.MaxConnections, n, prio, th.MaxPendingRequests, n, prio, th.MaxRequests, n, prio, th.MaxRetries)
		}
		fmt.Fprintf(&sb, "%s::added_via_api::%t\n", n, !b.s.clusters.IsStatic(n))
		if c.Config().Type == cluster.TypeEDS {
			fmt.Fprintf(&sb, "%s::eds_service_name::%s\n", n, c.Config().ServiceName)
		}
		for _, h := range c.Hosts() {
			p := n + "::" + h.String() + "::"
			counters := c.HostCounters(h)
			counters["rq_active"], counters["rq_error"], counters["rq_success"], counters["rq_timeout"] = 0, 0, 0, 0
			keys := make([]string, 0, len(counters))
			for k := range counters {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(&sb, "%s%s::%d\n", p, k, counters[k])
			}
			flags := c.HealthFlags(h)
			fmt.Fprintf(&sb, "%shostname::\n%shealth_flags::%s\n%sweight::1\n%sregion::\n%szone::\n%ssub_zone::\n%scanary::false\n%spriority::0\n%ssuccess_rate::-1\n%slocal_origin_success_rate::-1\n",
				p, p, flags, p, p, p, p, p, p, p, p)
		}
	}
	_, _ = io.WriteString(w, sb.String())
}
