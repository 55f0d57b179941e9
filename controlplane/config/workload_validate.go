package config

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meshlab/meshlab/controlplane/model"
)

// maxReplicas bounds a Workload's pods: each is a namespace, a proxy and an app.
const maxReplicas = 256

// proxyLogLevels are Envoy's log levels.
var proxyLogLevels = []string{"trace", "debug", "info", "warning", "warn", "error", "critical", "off"}

// validateWorkload checks a decoded Workload and returns its pods (without addresses), or
// nil after recording its problems.
func validateWorkload(w *Workload, p problems) []*model.Pod {
	n := len(*p.list)
	checkName(p, "metadata.name", w.Metadata.Name, maxPodName)
	checkName(p, "metadata.namespace", p.origin.Namespace, 63)
	spec := &w.Spec
	replicas := 1
	if spec.Replicas != nil {
		replicas = *spec.Replicas
		if replicas < 0 || replicas > maxReplicas {
			p.addf("spec.replicas", "%d is out of range 0-%d", replicas, maxReplicas)
		}
	}
	sa := spec.ServiceAccount
	if sa == "" {
		sa = "default"
	}
	checkName(p, "spec.serviceAccount", sa, 63)
	for _, k := range slices.Sorted(maps.Keys(spec.Labels)) {
		if k == "" {
			p.addf("spec.labels", "a label key must not be empty")
		}
		if v := spec.Labels[k]; len(v) > 63 {
			p.addf("spec.labels."+k, "value is %d characters, more than 63", len(v))
		}
	}
	ports := workloadPorts(spec.Ports, p)
	app := appSpec(spec, p)
	sidecar := sidecarSpec(spec.Sidecar, p)
	sidecar.GRPCAgent = sidecar.Inject && grpcAgentTemplate(w.Metadata.Annotations)
	names := podNames(w.Metadata.Name, replicas)
	for _, name := range names {
		if len(name) > maxPodName {
			p.addf("spec.replicas", "pod name %q is %d characters, more than %d", name, len(name), maxPodName)
			break
		}
	}
	if len(*p.list) > n {
		return nil
	}
	pods := make([]*model.Pod, 0, len(names))
	for _, name := range names {
		labels := maps.Clone(spec.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		pods = append(pods, &model.Pod{
			Name:           name,
			Namespace:      p.origin.Namespace,
			Workload:       w.Metadata.Name,
			Labels:         labels,
			Annotations:    maps.Clone(w.Metadata.Annotations),
			ServiceAccount: sa,
			Ports:          append([]uint16(nil), ports...),
			App: model.AppSpec{
				Command:      append([]string(nil), app.Command...),
				Upstreams:    append([]string(nil), app.Upstreams...),
				StartupCalls: append([]string(nil), app.StartupCalls...),
				ErrorRate:    app.ErrorRate,
				ErrorCode:    app.ErrorCode,
				Latency:      app.Latency,
			},
			Sidecar: sidecar,
			Origin:  p.origin,
		})
	}
	return pods
}

// podNames returns the names of a workload's pods: the workload's own name for one
// replica, <name>-<i> for several.
func podNames(name string, replicas int) []string {
	if replicas == 1 {
		return []string{name}
	}
	if replicas < 0 || replicas > maxReplicas {
		return nil
	}
	names := make([]string, replicas)
	for i := range names {
		names[i] = name + "-" + strconv.Itoa(i)
	}
	return names
}

func workloadPorts(in []int, p problems) []uint16 {
	out := make([]uint16, 0, len(in))
	seen := map[int]int{}
	for i, port := range in {
		field := fmt.Sprintf("spec.ports[%d]", i)
		if msg := checkAppPort(int64(port)); msg != "" {
			p.addf(field, "%s", msg)
			continue
		}
		if j, dup := seen[port]; dup {
			p.addf(field, "%d is a duplicate of spec.ports[%d]", port, j)
			continue
		}
		seen[port] = i
		out = append(out, uint16(port))
	}
	return out
}

func appSpec(spec *WorkloadSpec, p problems) model.AppSpec {
	if spec.App != nil && len(spec.Command) > 0 {
		p.addf("spec", "app and command are mutually exclusive: set one")
	}
	for i, arg := range spec.Command {
		if i == 0 && arg == "" {
			p.addf("spec.command[0]", "the program must not be empty")
		}
	}
	var app model.AppSpec
	app.Command = spec.Command
	if spec.App == nil {
		return app
	}
	checkURLs("spec.app.upstreams", spec.App.Upstreams, p)
	app.Upstreams = spec.App.Upstreams
	app.StartupCalls = startupCalls(spec.App.StartupCalls, p)
	if r := spec.App.ErrorRate; r < 0 || r > 1 {
		p.addf("spec.app.errorRate", "%g is not between 0 and 1", r)
	}
	app.ErrorRate = spec.App.ErrorRate
	if c := spec.App.ErrorCode; c != 0 && (c < 200 || c > 599) {
		p.addf("spec.app.errorCode", "%d is not an HTTP status between 200 and 599", c)
	}
	app.ErrorCode = spec.App.ErrorCode
	if spec.App.Latency != "" {
		d, err := time.ParseDuration(spec.App.Latency)
		if err != nil || d < 0 {
			p.addf("spec.app.latency", "%q is not a non-negative duration such as \"100ms\"", spec.App.Latency)
		}
		app.Latency = d
	}
	return app
}

func sidecarSpec(in *SidecarConfig, p problems) model.SidecarSpec {
	out := model.SidecarSpec{Inject: true}
	if in == nil {
		return out
	}
	if in.Inject != nil {
		out.Inject = *in.Inject
	}
	out.HoldApplicationUntilProxyStarts = in.HoldApplicationUntilProxyStarts
	if in.LogLevel != "" {
		ok := false
		for _, l := range proxyLogLevels {
			ok = ok || l == in.LogLevel
		}
		if !ok {
			p.addf("spec.sidecar.logLevel", "%q is not one of %v", in.LogLevel, proxyLogLevels)
		}
	}
	out.LogLevel = in.LogLevel
	if in.ProxyPath != "" && !strings.HasPrefix(in.ProxyPath, "/") {
		p.addf("spec.sidecar.proxyPath", "%q is not an absolute path", in.ProxyPath)
	}
	out.ProxyPath = in.ProxyPath
	proxySettings(in, &out, p)
	if !out.Inject && out.HoldApplicationUntilProxyStarts {
		p.addf("spec.sidecar.holdApplicationUntilProxyStarts", "needs a sidecar, but inject is false")
	}
	return out
}
