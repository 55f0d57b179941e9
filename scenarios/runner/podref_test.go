package runner

import (
	"regexp"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/scenarios"
)

// deployLab is a lab on Kubernetes Deployments, whose pods are named
// <deployment>-<hash>-<suffix>: its steps name them as kubectl would, by Deployment and
// by labels.
const deployLab = `apiVersion: meshlab.dev/v1alpha1
kind: Lab
metadata: {name: t}
spec:
  title: test
  steps:
    - name: one
      instructions: send requests
      solution:
        - traffic: {from: deploy/client-v1, url: "http://server:9080/details/0", count: 5}
        - restart-proxy: {pod: app=server}
      checks:
        - stat: {pod: "app=server,version=v1", name: "cluster.inbound|9080||.upstream_rq_200", op: ">", value: 0}
        - status: {code: "200", fraction: 100%, from: deployment/client-v1}
---
apiVersion: v1
kind: Service
metadata: {name: server}
spec:
  selector: {app: server}
  ports: [{name: http, port: 9080}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: server-v1}
spec:
  selector: {matchLabels: {app: server, version: v1}}
  template:
    metadata: {labels: {app: server, version: v1}}
    spec:
      containers:
      - name: details
        image: registry.istio.io/release/examples-bookinfo-details-v1:1.20.3
        ports: [{containerPort: 9080}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: client-v1}
spec:
  selector: {matchLabels: {app: client}}
  template:
    metadata: {labels: {app: client}}
    spec:
      containers:
      - name: curl
        image: curlimages/curl
        command: ["/bin/sleep", "infinity"]
`

// TestLabNamesPodsByDeploymentAndLabels: a lab's pod references resolve to the pod kubectl
// would pick (the run asks the lab for that pod's name), and the commands shown to the
// attendee name the pod as the lab wrote it, a selector the way Istio's docs find it.
func TestLabNamesPodsByDeploymentAndLabels(t *testing.T) {
	l, err := parse(t, deployLab)
	if err != nil {
		t.Fatal(err)
	}
	deployPod := regexp.MustCompile(`^(client|server)-v1-[a-z0-9]+-[a-z0-9]{5}$`)
	st := l.Steps[0]
	for what, got := range map[string]string{
		"traffic.from":      st.Solution[0].Traffic.From,
		"restart-proxy.pod": st.Solution[1].RestartProxy.Pod,
		"stat.pod":          st.Checks[0].Stat.Pod,
		"status.from":       st.Checks[1].Status.From,
	} {
		if !deployPod.MatchString(got) {
			t.Errorf("%s resolved to %q, want a Deployment's pod name", what, got)
		}
	}
	if from, stat := st.Solution[0].Traffic.From, st.Checks[0].Stat.Pod; !strings.HasPrefix(from, "client-v1-") || !strings.HasPrefix(stat, "server-v1-") {
		t.Errorf("traffic from %q, stat of %q: want client-v1's pod and server-v1's", from, stat)
	}
	tasks := Tasks(l, 0)
	if len(tasks) != 2 {
		t.Fatalf("tasks %+v", tasks)
	}
	if want := "meshlab exec deploy/client-v1 -- curl "; !strings.Contains(tasks[0].Command, want) {
		t.Errorf("traffic task %q, want %q", tasks[0].Command, want)
	}
	if want := `meshlab proxy restart "$(meshlab get pod -l app=server -o jsonpath='{.items[0].metadata.name}')"`; tasks[1].Command != want {
		t.Errorf("restart task %q, want %q", tasks[1].Command, want)
	}
}

func TestLabPodReferenceErrors(t *testing.T) {
	for _, tc := range []struct{ old, new, want string }{
		{"from: deploy/client-v1", "from: deploy/nothere", `traffic.from: the lab has no deploy "nothere" (its pods: `},
		{"from: deploy/client-v1", "from: service/server", `traffic.from: "service/server": service is not a kind that has pods`},
		{"pod: app=server}", "pod: app=nothere}", `restart-proxy.pod: no pod has labels app=nothere`},
		{"pod: app=server}", "pod: app=(}", `restart-proxy.pod: label selector "app=(": `},
	} {
		_, err := Parse("t.yaml", []byte(strings.Replace(deployLab, tc.old, tc.new, 1)), Sources{Scenario: scenarios.Lookup})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.new, err, tc.want)
		}
	}
}
