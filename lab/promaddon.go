package lab

import (
	"context"
	"path/filepath"
	"strings"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/lab/promserver"
	"github.com/meshlab/meshlab/netns"
)

// The Prometheus addon (samples/addons/prometheus.yaml) runs Debian's prometheus as its
// pod's app, on the addon's configuration with Kubernetes discovery answered by files
// the lab writes from its pods (lab/promserver; docs/ARCHITECTURE.md, "Prometheus").

// promDir is the directory of a Prometheus pod: configuration, discovery files, TSDB.
func promDir(l *Lab, p *model.Pod) promserver.Dir {
	return promserver.Dir(filepath.Join(l.paths.PodDir(p.Key()), "prometheus"))
}

// prometheusApp is the command line of the Prometheus addon's pod and the read-write
// bind of its directory in sb; ok is false for every other pod.
func prometheusApp(l *Lab, p *model.Pod, sb *netns.Sandbox) (argv []string, ok bool, err error) {
	if p.App.Persona != promserver.Persona {
		return nil, false, nil
	}
	d := promDir(l, p)
	argv, err = promserver.Prepare(d, podVolumeRoot(l.paths.PodDir(p.Key())), p.App.Args, int(sb.UID))
	if err != nil {
		return nil, true, err
	}
	writePromTargets(l)
	sb.Binds = append(sb.Binds, netns.Bind{Src: string(d), Dst: string(d), Writable: true})
	return argv, true, nil
}

// promNode is the node name the lab's pods report (kubectl's NODE).
const promNode = "meshlab"

// writePromTargets writes the pod role's discovery file of every Prometheus pod of the
// lab: its pods and its ztunnel, as Kubernetes discovery would list them.
func writePromTargets(l *Lab) {
	m := l.below().Model()
	var dirs []promserver.Dir
	var pods []promserver.Pod
	for _, p := range m.Pods {
		if p.App.Persona == promserver.Persona {
			dirs = append(dirs, promDir(l, p))
		}
		pods = append(pods, promserver.FromModel(p, promNode, true))
	}
	if len(dirs) == 0 {
		return
	}
	if z := ztunnelPod(l); z != nil {
		zp := promserver.FromModel(z, promNode, true)
		// Istio's ztunnel DaemonSet points Prometheus at its metrics port.
		zp.Annotations["prometheus.io/scrape"], zp.Annotations["prometheus.io/port"] = "true", "15020"
		zp.Containers = []promserver.Container{{Name: "istio-proxy", Image: "docker.io/istio/ztunnel", Ports: []uint16{15020, 15021}}}
		zp.Controller, zp.ControllerName = "DaemonSet", "ztunnel"
		pods = append(pods, zp)
	}
	groups := promserver.PodTargets(pods)
	for _, d := range dirs {
		if err := promserver.WriteTargets(d, "pod", groups); err != nil {
			l.log.Warn("prometheus: write discovery file", "dir", d, "err", err)
		}
	}
}

// watchPromTargets rewrites the Prometheus pods' discovery files after pods come, go or
// fail, until ctx ends: a burst of pod events makes one write.
func watchPromTargets(ctx context.Context, l *Lab) {
	for ctx.Err() == nil {
		_, events, cancel := l.bus.Subscribe(^uint64(0), 256)
		watchPromEvents(ctx, l, events)
		cancel()
		writePromTargets(l) // cut off or ending: what was missed is written now
		writeKialiServices(l)
	}
}

func watchPromEvents(ctx context.Context, l *Lab, events <-chan api.Event) {
	const settle = 200 * time.Millisecond
	var due <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-events:
			if !ok {
				return
			}
			switch e.Kind {
			case EventPodCreated, EventPodReady, EventPodFailed, EventPodDeleted:
				if due == nil {
					due = time.After(settle)
				}
			default:
				// An applied change (config.created, configured, deleted...): Kiali's
				// Services file follows the lab's Services.
				if strings.HasPrefix(e.Kind, "config.") && e.Kind != EventPushFailed && due == nil {
					due = time.After(settle)
				}
			}
		case <-due:
			due = nil
			writePromTargets(l)
			writeKialiServices(l) // kialiaddon.go
		}
	}
}
