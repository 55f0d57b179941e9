package lab

import (
	"strings"
	"testing"
)

func TestFindPodAsKubectl(t *testing.T) {
	t.Parallel()
	r := &Record{Name: "t", Pods: []PodRecord{
		{Name: "reviews-v1-7c4b99cd-x7z2b", Namespace: "default", Workload: "reviews-v1"},
		{Name: "reviews-v1-7c4b99cd-b5k9q", Namespace: "default", Workload: "reviews-v1"},
		{Name: "curl-5f9cc9ddf9-65db7", Namespace: "legacy", Workload: "curl"},
		{Name: "frontend-v1", Namespace: "default", Workload: "frontend-v1"},
	}}
	for _, tt := range []struct {
		ref, ns, want, err string
	}{
		{ref: "frontend-v1", want: "frontend-v1"},
		{ref: "pod/frontend-v1", want: "frontend-v1"},
		{ref: "deploy/reviews-v1", want: "reviews-v1-7c4b99cd-b5k9q"}, // the first by name
		{ref: "deployments.apps/reviews-v1", want: "reviews-v1-7c4b99cd-b5k9q"},
		{ref: "deploy/curl", ns: "legacy", want: "curl-5f9cc9ddf9-65db7"},
		{ref: "deploy/curl", ns: "default", err: `unknown deploy "curl" in lab t (valid: frontend-v1, reviews-v1)`},
		{ref: "svc/reviews", err: `"svc/reviews": svc is not a kind that has pods`},
		{ref: "nope", err: `unknown pod "nope" in lab t (valid: curl-5f9cc9ddf9-65db7, frontend-v1, reviews-v1-7c4b99cd-b5k9q, reviews-v1-7c4b99cd-x7z2b)`},
	} {
		p, err := r.FindPod(tt.ref, tt.ns)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("FindPod(%q, %q) = %v, %v; want error %q", tt.ref, tt.ns, p.Name, err, tt.err)
		case tt.err == "" && (err != nil || p.Name != tt.want):
			t.Errorf("FindPod(%q, %q) = %v, %v; want %s", tt.ref, tt.ns, p.Name, err, tt.want)
		}
	}
}
