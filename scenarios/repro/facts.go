package repro

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/meshlab/meshlab/api"
)

// Facts is what a repro file records of a lab, besides its objects.
type Facts struct {
	Lab      string     `json:"lab"`
	Exported time.Time  `json:"exported"`
	Pods     []PodFacts `json:"pods"`
}

// PodFacts is what a repro file records of one pod.
type PodFacts struct {
	Pod          string   `json:"pod"`
	Sidecar      bool     `json:"sidecar"`
	DataPlane    string   `json:"dataPlane,omitempty"`
	ProxyVersion string   `json:"proxyVersion,omitempty"`
	Capture      []string `json:"capture,omitempty"` // nat rules, without counters and comments
	CaptureError string   `json:"captureError,omitempty"`
	// History is the xDS history the control plane kept for the pod's proxy.
	History []api.HistorySnapshot `json:"history,omitempty"`
}

// Source is the lab API a repro reads; *api.Client implements it.
type Source interface {
	Lab(ctx context.Context) (api.LabInfo, error)
	Pods(ctx context.Context) ([]api.PodStatus, error)
	Objects(ctx context.Context, kind, namespace, name string) ([]api.ConfigObject, error)
	PodDetail(ctx context.Context, pod string) (api.PodDetail, error)
	PodHistory(ctx context.Context, pod string) (api.PodHistory, error)
	InspectPod(ctx context.Context, pod string, lines int) (api.PodInspection, error)
}

var _ Source = (*api.Client)(nil)

// Collect reads the facts of every pod of the lab behind src.
func Collect(ctx context.Context, src Source, now time.Time) (Facts, error) {
	info, err := src.Lab(ctx)
	if err != nil {
		return Facts{}, fmt.Errorf("read lab: %w", err)
	}
	pods, err := src.Pods(ctx)
	if err != nil {
		return Facts{}, fmt.Errorf("list pods: %w", err)
	}
	f := Facts{Lab: info.Name, Exported: now.UTC()}
	for _, p := range pods {
		pf := PodFacts{Pod: p.Name, Sidecar: p.Sidecar, DataPlane: p.DataPlane}
		if p.Sidecar {
			d, err := src.PodDetail(ctx, p.Name)
			if err != nil {
				return Facts{}, fmt.Errorf("read pod %s: %w", p.Name, err)
			}
			if d.Proxy != nil {
				pf.ProxyVersion = d.Proxy.ProxyVersion
				pf.DataPlane = cmpOr(d.Proxy.DataPlane, pf.DataPlane)
			}
			h, err := src.PodHistory(ctx, p.Name)
			if err != nil {
				return Facts{}, fmt.Errorf("read history of %s: %w", p.Name, err)
			}
			pf.History = h.Snapshots
		}
		in, err := src.InspectPod(ctx, p.Name, 0)
		if err != nil {
			return Facts{}, fmt.Errorf("inspect pod %s: %w", p.Name, err)
		}
		pf.Capture, pf.CaptureError = CaptureRules(in.Capture), in.CaptureError
		f.Pods = append(f.Pods, pf)
	}
	return f, nil
}

var counters = regexp.MustCompile(`^\[\d+:\d+\]\s*`)

// CaptureRules turns `iptables-save -c` output into comparable rules: no comment lines,
// no packet/byte counters (on rules or chain policies), no blank lines.
func CaptureRules(save string) []string {
	var out []string
	for _, line := range strings.Split(save, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = counters.ReplaceAllString(line, "")
		if strings.HasPrefix(line, ":") { // ":CHAIN POLICY [p:b]"
			if i := strings.LastIndex(line, " ["); i > 0 {
				line = line[:i]
			}
		}
		out = append(out, line)
	}
	return out
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
