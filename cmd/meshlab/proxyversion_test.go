package main

import (
	"strings"
	"testing"

	"github.com/meshlab/meshlab/dataplane/agent"
)

// The agent reports `meshlab proxy --version` of its own binary without running it
// (agent.BuiltinProxyVersion); this holds it to what the command prints.
func TestBuiltinProxyVersionIsWhatTheProxyPrints(t *testing.T) {
	out, err := runRoot(t, "proxy", "--version")
	if err != nil {
		t.Fatal(err)
	}
	first := ""
	for _, line := range strings.Split(out, "\n") {
		if first = strings.TrimSpace(line); first != "" {
			break
		}
	}
	if first != agent.BuiltinProxyVersion {
		t.Errorf("meshlab proxy --version says %q, agent.BuiltinProxyVersion is %q", first, agent.BuiltinProxyVersion)
	}
}
