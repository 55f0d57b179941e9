package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestDocsCommandsVerbs runs, in a lab, the verbs and flags the docs command check
// (cmd/meshlab/testdata/docs_commands.txt) needed added, as the task pages write them:
// create configmap --from-file (SNI passthrough, egress TLS origination), create role
// and rolebinding (egress TLS origination), proxy-config log --level (authz dry-run,
// authz ingress), x es -oprom (metrics Telemetry API), rollout status (secure metrics),
// delete KIND --all -A (logs Telemetry API), and one refused form, which says why.
func TestDocsCommandsVerbs(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, "../scenarios/hello.yaml")
	run := func(want string, args ...string) string {
		t.Helper()
		out, err := meshlab(t, append([]string{"--lab", l.name}, args...)...)
		if err != nil || !strings.Contains(out, want) {
			t.Fatalf("meshlab %s: %v\n%s\nwant %q in it", strings.Join(args, " "), err, out, want)
		}
		return out
	}
	fails := func(want string, args ...string) {
		t.Helper()
		out, err := meshlab(t, append([]string{"--lab", l.name}, args...)...)
		if err == nil || !strings.Contains(out, want) {
			t.Fatalf("meshlab %s: %v\n%s\nwant an error saying %q", strings.Join(args, " "), err, out, want)
		}
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte("events {\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	curl := filepath.Join(dir, "curl.yaml")
	if err := os.WriteFile(curl, []byte(curlSampleYAML), 0o644); err != nil {
		t.Fatal(err)
	}

	run("configmap/nginx-configmap created", "create", "configmap", "nginx-configmap", "--from-file=nginx.conf="+conf)
	run(`"nginx.conf":"events {\n}\n"`, "get", "configmap", "nginx-configmap", "-o", "jsonpath={.data}")
	fails(`"nginx-configmap" already exists`, "create", "configmap", "nginx-configmap", "--from-file=nginx.conf="+conf)
	run("role.rbac.authorization.k8s.io/client-credential-role created", "create", "role", "client-credential-role", "--resource=secret", "--verb=list")
	run("secrets", "get", "role", "client-credential-role", "-o", "jsonpath={.rules[0].resources[0]}")
	run("rolebinding.rbac.authorization.k8s.io/client-credential-role-binding created",
		"create", "rolebinding", "client-credential-role-binding", "--role=client-credential-role", "--serviceaccount=default:sleep")
	run("default:sleep", "get", "rolebinding", "client-credential-role-binding", "-o", "jsonpath={.subjects[0].namespace}:{.subjects[0].name}")

	out := run("frontend-v1.default:\n", "proxy-config", "log", "frontend-v1", "--level", "http:debug")
	if !strings.Contains(out, "  http: debug\n") || !strings.Contains(out, "  router: info\n") {
		t.Fatalf("proxy-config log --level http:debug:\n%s\nwant the http logger at debug, the others as they were", out)
	}
	run("  http: debug\n", "proxy-config", "log", "frontend-v1") // read back
	// The authorization pages' rbac logger (the RBAC filters' decisions); a logger the
	// proxy does not have is named with those it has.
	run("  rbac: debug\n", "proxy-config", "log", "deploy/frontend-v1.default", "--level", "rbac:debug")
	fails("unrecognized logger name: lua (this proxy's loggers: admin, config,", "proxy-config", "log", "deploy/frontend-v1.default", "--level", "lua:debug")
	run("  http: warning\n", "proxy-config", "log", "frontend-v1", "-r")

	out = run("\nThe result of pod frontend-v1:\n\n", "x", "es", "frontend-v1", "-oprom")
	if !strings.Contains(out, "# TYPE envoy_") {
		t.Fatalf("x es frontend-v1 -oprom:\n%s\nwant Prometheus' exposition of the proxy's stats", out)
	}

	run("deployment.apps/curl created", "apply", "-f", curl)
	run(`deployment "curl" successfully rolled out`, "rollout", "status", "deployment/curl", "--timeout=60s")

	out = run(`"nginx-configmap" deleted`, "delete", "configmap", "--all", "-A")
	if strings.Contains(out, "kube-root-ca.crt") {
		t.Fatalf("delete configmap --all -A:\n%s\nwant only the configmaps the lab holds as objects", out)
	}
	run(`"client-credential-role" deleted`, "delete", "role", "--all")
	fails("not found", "get", "role", "client-credential-role")

	fails("kustomize: meshlab has no kustomize verb", "kustomize", "github.com/kubernetes-sigs/gateway-api/config/crd?ref=v1.1.0")
}
