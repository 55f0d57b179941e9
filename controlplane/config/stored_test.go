package config

import (
	"slices"
	"strings"
	"testing"
)

// storedObjects are kinds a lab keeps without acting on them, as Istio's samples and
// installs write them.
const storedObjects = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: prometheus, labels: {app: prometheus}}
rules:
- apiGroups: [""]
  resources: [nodes, services, endpoints, pods]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: prometheus}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: prometheus}
subjects: [{kind: ServiceAccount, name: prometheus, namespace: istio-system}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: reader, namespace: shop}
rules: [{apiGroups: [""], resources: [secrets], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: reader, namespace: shop}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reader}
subjects: [{kind: ServiceAccount, name: default, namespace: shop}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: backend}
spec: {minAvailable: 1, selector: {matchLabels: {app: backend}}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: backend}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: backend}
  minReplicas: 1
  maxReplicas: 5
  metrics: [{type: Resource, resource: {name: cpu, target: {type: Utilization, averageUtilization: 80}}}]
`

// TestStoredKindsKeptShownDeleted: RBAC, disruption budgets and autoscalers are kept as
// written (created, then unchanged or configured as any object), found by their kubectl
// spellings, cluster-scoped ones in no namespace of -n, deleted by delete, and change
// nothing the lab builds.
func TestStoredKindsKeptShownDeleted(t *testing.T) {
	t.Parallel()
	base, err := Load("base.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	sc, changes, err := base.Apply(File{Name: "stored.yaml", Data: []byte(storedObjects), Namespace: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range changes {
		got = append(got, c.String())
	}
	want := []string{
		"ClusterRole default/prometheus created", "ClusterRoleBinding default/prometheus created",
		"Role shop/reader created", "RoleBinding shop/reader created",
		"PodDisruptionBudget shop/backend created", "HorizontalPodAutoscaler shop/backend created",
	}
	if !slices.Equal(got, want) {
		t.Errorf("changes:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	for spelling, kind := range map[string]string{"clusterrole": "ClusterRole", "clusterrolebindings": "ClusterRoleBinding", "roles": "Role",
		"rolebinding": "RoleBinding", "pdb": "PodDisruptionBudget", "hpa": "HorizontalPodAutoscaler"} {
		objs, err := sc.Find(spelling, "")
		if err != nil || len(objs) != 1 || objs[0].Origin.Kind != kind {
			t.Errorf("Find(%q) = %d objects, %v; want the %s", spelling, len(objs), err, kind)
			continue
		}
		if !strings.Contains(string(objs[0].JSON), `"kind":"`+kind+`"`) {
			t.Errorf("%s kept as %s, want as written", kind, objs[0].JSON)
		}
		if KindGroup(kind) == "" || StoredKindNote(kind) == "" {
			t.Errorf("%s: group %q, note %q", kind, KindGroup(kind), StoredKindNote(kind))
		}
	}
	if _, changes, err := sc.Apply(File{Name: "again.yaml", Data: []byte(storedObjects), Namespace: "shop"}); err != nil || changes[0].Action != "unchanged" {
		t.Errorf("apply again: %v, %+v; want unchanged", err, changes)
	}
	m, err := sc.Build(defaultOpts)
	if err != nil || len(m.Pods) != 0 || len(m.Services) != 0 {
		t.Errorf("build: %v; %d pods, %d services, want none", err, len(m.Pods), len(m.Services))
	}
	after, changes, err := sc.Delete(Ref{Kind: "clusterrole", Name: "prometheus"}, Ref{Kind: "hpa", Namespace: "shop", Name: "backend"})
	if err != nil || len(changes) != 2 || changes[0].Action != "deleted" {
		t.Fatalf("delete: %v, %+v", err, changes)
	}
	if objs, _ := after.Find("ClusterRole", ""); len(objs) != 0 {
		t.Errorf("the ClusterRole is still there after delete")
	}
	if objs, _ := after.Find("ClusterRoleBinding", ""); len(objs) != 1 {
		t.Errorf("delete took the ClusterRoleBinding too")
	}
	if StoredKindNote("Service") != "" {
		t.Errorf("a Service has a stored-kind note")
	}
}

// TestStoredKindsRefusedOutsideTheirGroup: a stored kind under another group's
// apiVersion is refused, as an API server knows no such resource.
func TestStoredKindsRefusedOutsideTheirGroup(t *testing.T) {
	t.Parallel()
	_, err := Load("bad.yaml", []byte("apiVersion: v1\nkind: ClusterRole\nmetadata: {name: x}\n"))
	if err == nil || !strings.Contains(err.Error(), `"v1" is not an apiVersion of kind ClusterRole (want rbac.authorization.k8s.io/<version>)`) {
		t.Errorf("load: %v", err)
	}
}

// TestClusterDumpSkipsKubernetesRBAC: a cluster's dump holds Kubernetes' own RBAC
// (system:*, labelled rbac-defaults); the lab keeps only the dump's own.
func TestClusterDumpSkipsKubernetesRBAC(t *testing.T) {
	t.Parallel()
	dump := `apiVersion: v1
kind: List
items:
- apiVersion: rbac.authorization.k8s.io/v1
  kind: ClusterRole
  metadata: {name: "system:aggregate-to-view", labels: {kubernetes.io/bootstrapping: rbac-defaults}}
- apiVersion: rbac.authorization.k8s.io/v1
  kind: ClusterRole
  metadata: {name: "cluster-admin", labels: {kubernetes.io/bootstrapping: rbac-defaults}}
- apiVersion: rbac.authorization.k8s.io/v1
  kind: ClusterRole
  metadata: {name: kiali}
`
	sc, err := Load("dump.yaml", []byte(dump))
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, o := range sc.Objects {
		kept = append(kept, o.Origin.Name)
	}
	if !slices.Equal(kept, []string{"kiali"}) || len(sc.Skipped) != 2 || sc.Skipped[0].Reason != "Kubernetes' own RBAC defaults" {
		t.Errorf("kept %v, skipped %+v; want kiali kept and Kubernetes' two skipped", kept, sc.Skipped)
	}
}
