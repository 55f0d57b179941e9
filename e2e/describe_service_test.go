package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestDescribeServiceAnalyzeCompletion checks the inspection verbs against a running hello
// lab: describe service (ports, VIP, pods, endpoint health from a client proxy),
// analyze of the lab's objects (clean: exit 0), -o json, completion of pod names, and the
// errors listing valid names.
func TestDescribeServiceAnalyzeCompletion(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t)

	// Endpoint health comes from the frontend's proxy: poll until both backends are seen.
	var out string
	deadline := time.Now().Add(20 * time.Second)
	for {
		var err error
		out, err = meshlab(t, "describe", "service", "backend", "--name", l.name)
		if err != nil {
			t.Fatalf("describe service: %v\n%s", err, out)
		}
		if strings.Count(out, "::") == 0 && strings.Count(out, "healthy") >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, want := range []string{
		"Hostname:   backend.default.svc.cluster.local", "VIP:        10.96.",
		"http  8080  8080", "backend-v1", "backend-v2", "Endpoints (as frontend-v1's proxy sees them)",
		"outbound|8080||backend.default.svc.cluster.local",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("describe service backend lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "healthy") < 2 {
		t.Errorf("want two healthy endpoints:\n%s", out)
	}

	out, err := meshlab(t, "describe", "service", "backend", "--name", l.name, "-o", "json")
	var v struct {
		Pods []struct {
			Name  string
			Ready bool
		}
	}
	if err != nil || json.Unmarshal([]byte(out), &v) != nil || len(v.Pods) != 2 || !v.Pods[0].Ready {
		t.Errorf("describe service -o json: err=%v pods=%+v\n%s", err, v.Pods, out)
	}

	out, err = meshlab(t, "describe", "service", "nope", "--name", l.name)
	if err == nil || !strings.Contains(out, "backend") || !strings.Contains(out, "frontend") {
		t.Errorf("unknown service: err=%v, want the valid names in:\n%s", err, out)
	}

	out, err = meshlab(t, "analyze", "--name", l.name)
	if err != nil || !strings.Contains(out, "No validation issues") {
		t.Errorf("analyze of the hello lab: err=%v\n%s", err, out)
	}

	out, err = meshlab(t, "status", "--name", l.name, "-o", "yaml")
	if err != nil || !strings.Contains(out, "name: frontend-v1") {
		t.Errorf("status -o yaml: err=%v\n%s", err, out)
	}

	// Cobra's hidden __complete verb is what the generated scripts call.
	out, err = meshlab(t, "__complete", "describe", "pod", "--name", l.name, "")
	if err != nil || !strings.Contains(out, "frontend-v1") || !strings.Contains(out, "backend-v2") {
		t.Errorf("completion of pod names: err=%v\n%s", err, out)
	}
	out, err = meshlab(t, "__complete", "describe", "service", "--name", l.name, "")
	if err != nil || !strings.Contains(out, "backend") {
		t.Errorf("completion of service names: err=%v\n%s", err, out)
	}
	out, err = meshlab(t, "__complete", "status", "--name", "")
	if err != nil || !strings.Contains(out, l.name) {
		t.Errorf("completion of lab names: err=%v\n%s", err, out)
	}
}
