package lab

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/lab/ambient"
)

// ztunnelAdminTimeout bounds one read of ztunnel's admin.
const ztunnelAdminTimeout = 10 * time.Second

// ztunnelAdmin is the lab's web.ZtunnelAdmin: ztunnel's admin (127.0.0.1:15000) reached
// inside ztunnel's network namespace through lab/ambient. A lab with no pod in ambient mode
// and no ztunnel connected to its node agent has no ztunnel to ask: api.ErrNoZtunnel.
type ztunnelAdmin struct{ l *Lab }

func (z ztunnelAdmin) ZtunnelAdminGet(ctx context.Context, path string) ([]byte, error) {
	l := z.l
	if l.ambient == nil {
		return nil, api.ErrNoZtunnel
	}
	if !l.ambient.Connected() && !hasAmbientPod(l) {
		return nil, api.ErrNoZtunnel
	}
	ctx, cancel := context.WithTimeout(ctx, ztunnelAdminTimeout)
	defer cancel()
	body, err := ambient.AdminGet(ctx, NamespaceName(l.opts.Name, ztunnelKey(l)), path)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	b, err := io.ReadAll(io.LimitReader(body, api.MaxAnswerBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s from ztunnel's admin: %w", path, err)
	}
	if len(b) > api.MaxAnswerBytes {
		return nil, fmt.Errorf("read %s from ztunnel's admin: larger than %d bytes", path, api.MaxAnswerBytes)
	}
	return b, nil
}

// hasAmbientPod reports whether a pod of the lab's model is in ambient mode.
func hasAmbientPod(l *Lab) bool {
	l.mu.Lock()
	m := l.model
	l.mu.Unlock()
	if m == nil {
		return false
	}
	for _, p := range m.Pods {
		if model.DataplaneMode(m, p) == model.DataplaneAmbient {
			return true
		}
	}
	return false
}

// The lab's ztunnel is a pod of kubectl's views as Istio's DaemonSet pod is: `get pods
// -n istio-system` lists it (ready once it is connected to the node agent over ZDS,
// restarts as the lab's supervisor counted them), `describe pod` shows it and `logs`
// prints its log (ZtunnelLogFile). It is not in the model: no WDS workload, no Service
// selects it, and the mesh's config never reaches it but through WDS.

// ztunnelLabels are the labels of Istio's ztunnel DaemonSet pods (the ztunnel chart).
func ztunnelLabels() map[string]string {
	return map[string]string{
		"app": "ztunnel", "app.kubernetes.io/name": "ztunnel",
		model.LabelDataplaneMode: model.DataplaneModeNone, "sidecar.istio.io/inject": "false",
	}
}

// ZtunnelLogFile is the log of the lab at p's ztunnel, which `meshlab logs ztunnel-<x>
// -n istio-system` prints.
func ZtunnelLogFile(p Paths) string { return filepath.Join(ztunnelDir(p), "ztunnel.log") }

// ztunnelRecord is the lab's ztunnel pod as a pod record, nil while it has not started
// (it has written no log).
func ztunnelRecord(p Paths, r *Record) *PodRecord {
	if _, err := os.Stat(ZtunnelLogFile(p)); err != nil {
		return nil
	}
	name := ambient.ZtunnelPodName(r.Name)
	key := model.PodKey(ambient.ZtunnelNamespace, name)
	pr := &PodRecord{Name: name, Namespace: ambient.ZtunnelNamespace, Key: key, NetNS: NamespaceName(r.Name, key), Workload: "ztunnel", Ztunnel: true}
	if r.PodCIDR.IsValid() {
		pr.IP = ambient.ZtunnelIP(r.PodCIDR)
	}
	return pr
}

// ztunnelPod is the lab's ztunnel as a pod (not one of the model's), nil when the lab
// runs none.
func ztunnelPod(l *Lab) *model.Pod {
	if l.ambient == nil || !l.ambient.ZtunnelStarted() {
		return nil
	}
	return &model.Pod{
		Name: ambient.ZtunnelPodName(l.opts.Name), Namespace: ambient.ZtunnelNamespace, Workload: "ztunnel",
		IP: ambient.ZtunnelIP(l.opts.PodCIDR), ServiceAccount: ambient.ZtunnelServiceAccount, Labels: ztunnelLabels(),
	}
}

// ztunnelStatus is the ztunnel pod's status for `get pods`: ready once it is connected to
// the node agent, its restarts counted by the lab's supervisor.
func ztunnelStatus(l *Lab, z *model.Pod) api.PodStatus {
	st := api.PodStatus{Name: z.Name, Namespace: z.Namespace, Key: z.Key(), NetNS: NamespaceName(l.opts.Name, z.Key()), IP: z.IP, Epoch: -1,
		Ready: l.ambient.Connected()}
	if l.agents != nil {
		st.Restarts = l.agents.restartsOf(z.Key())
	}
	if !st.Ready {
		st.Message = "not connected to the node agent (ZDS)"
	}
	return st
}

// ztunnelDetail is `describe pod` of the ztunnel pod.
func ztunnelDetail(l *Lab, z *model.Pod) api.PodDetail {
	st := ztunnelStatus(l, z)
	m := l.below().Model()
	enrolled := 0
	for _, p := range m.Pods {
		if l.ambient.Annotated(p.Key()) {
			enrolled++
		}
	}
	return api.PodDetail{PodStatus: st, Labels: z.Labels, ServiceAccount: z.ServiceAccount, DataplaneMode: model.DataplaneNone.String(),
		Ztunnel: &api.ZtunnelPodStatus{Connected: st.Ready, Pods: enrolled, Restarts: st.Restarts, Log: ZtunnelLogFile(l.paths)}}
}

// ZtunnelMetrics reads the /stats/prometheus of the ztunnel of lab labName (15020 in its
// namespace), for the lab runner's checks: Prometheus text.
func ZtunnelMetrics(ctx context.Context, labName string) ([]byte, error) {
	key := model.PodKey(ambient.ZtunnelNamespace, ambient.ZtunnelPodName(labName))
	ctx, cancel := context.WithTimeout(ctx, ztunnelAdminTimeout)
	defer cancel()
	body, err := ambient.MetricsGet(ctx, NamespaceName(labName, key), "/stats/prometheus")
	if err != nil {
		return nil, err
	}
	defer body.Close()
	b, err := io.ReadAll(io.LimitReader(body, api.MaxAnswerBytes))
	if err != nil {
		return nil, fmt.Errorf("read %s's metrics: %w", key, err)
	}
	return b, nil
}
