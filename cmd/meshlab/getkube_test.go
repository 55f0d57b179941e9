package main

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
)

// TestKubeTableOfStoredKinds prints the kinds a lab keeps without acting on them in
// kubectl's columns: CREATED AT for roles, ROLE for bindings, a budget's and an
// autoscaler's own.
func TestKubeTableOfStoredKinds(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)
	const created = `"creationTimestamp":"2026-11-29T05:58:00Z"`
	for _, tc := range []struct {
		kind, object, want string
	}{
		{"ClusterRole", `{"metadata":{"name":"prometheus",` + created + `}}`,
			"NAME         CREATED AT\nprometheus   2026-11-29T05:58:00Z\n"},
		{"ClusterRoleBinding", `{"metadata":{"name":"prometheus",` + created + `},"roleRef":{"kind":"ClusterRole","name":"prometheus"}}`,
			"NAME         ROLE                     AGE\nprometheus   ClusterRole/prometheus   2m\n"},
		{"RoleBinding", `{"metadata":{"name":"reader",` + created + `},"roleRef":{"kind":"Role","name":"reader"}}`,
			"NAME     ROLE          AGE\nreader   Role/reader   2m\n"},
		{"PodDisruptionBudget", `{"metadata":{"name":"istiod",` + created + `},"spec":{"minAvailable":1}}`,
			"NAME     MIN AVAILABLE   MAX UNAVAILABLE   ALLOWED DISRUPTIONS   AGE\nistiod   1               N/A               0                     2m\n"},
		{"HorizontalPodAutoscaler", `{"metadata":{"name":"istiod",` + created + `},"spec":{"scaleTargetRef":{"kind":"Deployment","name":"istiod"},"minReplicas":1,"maxReplicas":5,` +
			`"metrics":[{"type":"Resource","resource":{"name":"cpu","target":{"type":"Utilization","averageUtilization":80}}}]}}`,
			"NAME     REFERENCE           TARGETS              MINPODS   MAXPODS   REPLICAS   AGE\nistiod   Deployment/istiod   cpu: <unknown>/80%   1         5         0          2m\n"},
	} {
		var out bytes.Buffer
		var meta struct {
			Metadata struct{ Name string } `json:"metadata"`
		}
		if err := json.Unmarshal([]byte(tc.object), &meta); err != nil {
			t.Fatal(err)
		}
		objs := []api.KubeObject{{Kind: tc.kind, Name: meta.Metadata.Name, Object: []byte(tc.object)}}
		if err := printKubeTable(&out, api.Kind{Kind: tc.kind}, objs, kubeTableForm{}, now); err != nil {
			t.Fatal(err)
		}
		if got := out.String(); got != tc.want {
			t.Errorf("%s:\n%s\nwant:\n%s", tc.kind, got, tc.want)
		}
	}
}

// TestKubeTableLabelColumns adds kubectl's -L columns after AGE, headed by each key's
// last segment in upper case, empty where an object lacks the label (the ambient
// waypoint page's `get ns -L istio.io/dataplane-mode`).
func TestKubeTableLabelColumns(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)
	objs := []api.KubeObject{
		{Kind: "Namespace", Name: "default", Object: []byte(`{"metadata":{"name":"default","creationTimestamp":"2026-11-29T05:58:00Z","labels":{"istio.io/dataplane-mode":"ambient","app":"x"}},"status":{"phase":"Active"}}`)},
		{Kind: "Namespace", Name: "istio-system", Object: []byte(`{"metadata":{"name":"istio-system","creationTimestamp":"2026-11-29T05:58:00Z"},"status":{"phase":"Active"}}`)},
	}
	var out bytes.Buffer
	form := kubeTableForm{labelCols: labelColumns{keys: []string{"istio.io/dataplane-mode", "app"}}}
	if err := printKubeTable(&out, api.Kind{Kind: "Namespace"}, objs, form, now); err != nil {
		t.Fatal(err)
	}
	want := "NAME           STATUS   AGE   DATAPLANE-MODE   APP\n" +
		"default        Active   2m    ambient          x\n" +
		"istio-system   Active   2m                     \n"
	if got := out.String(); got != want {
		t.Errorf("got:\n%q\nwant:\n%q", got, want)
	}
}

// TestKubeTableShowLabels adds kubectl's --show-labels column last, after -L's: every
// label as k=v sorted by key, <none> for an object without labels.
func TestKubeTableShowLabels(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)
	objs := []api.KubeObject{
		{Kind: "Namespace", Name: "default", Object: []byte(`{"metadata":{"name":"default","creationTimestamp":"2026-11-29T05:58:00Z","labels":{"kubernetes.io/metadata.name":"default","istio-injection":"enabled"}},"status":{"phase":"Active"}}`)},
		{Kind: "Namespace", Name: "foo", Object: []byte(`{"metadata":{"name":"foo","creationTimestamp":"2026-11-29T05:58:00Z"},"status":{"phase":"Active"}}`)},
	}
	var out bytes.Buffer
	form := kubeTableForm{labelCols: labelColumns{keys: []string{"istio-injection"}, all: true}}
	if err := printKubeTable(&out, api.Kind{Kind: "Namespace"}, objs, form, now); err != nil {
		t.Fatal(err)
	}
	want := "NAME      STATUS   AGE   ISTIO-INJECTION   LABELS\n" +
		"default   Active   2m    enabled           istio-injection=enabled,kubernetes.io/metadata.name=default\n" +
		"foo       Active   2m                      <none>\n"
	if got := out.String(); got != want {
		t.Errorf("got:\n%q\nwant:\n%q", got, want)
	}
	cmd := newGetCmd(&globalFlags{})
	if err := cmd.ParseFlags([]string{"--show-labels", "-L", "app"}); err != nil {
		t.Fatalf("get --show-labels -L app: %v", err)
	}
}

// TestReadyOf counts READY's containers as Istio's pods have them: a gateway's
// istio-proxy alone (1/1), an app with its sidecar (2/2), a proxyless gRPC pod's app with
// its agent (2/2), an app alone (1/1).
func TestReadyOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		listed  []string
		sidecar bool
		want    int
	}{
		{[]string{"istio-proxy"}, true, 1},
		{[]string{"productpage-v1", "istio-proxy"}, true, 2},
		{[]string{"grpc-client"}, true, 2},
		{[]string{"curl"}, false, 1},
		{nil, true, 2},
		{nil, false, 1},
	} {
		if got := readyOf(tc.listed, tc.sidecar); got != tc.want {
			t.Errorf("readyOf(%v, %v) = %d, want %d", tc.listed, tc.sidecar, got, tc.want)
		}
	}
}
