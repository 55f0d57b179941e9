package agent

import (
	"math"
	"runtime/debug"
	"strings"
	"testing"
)

// Without GOGC the collector is paused under a memory limit until resume, which puts
// back the percent and limit it found; GOGC in the environment leaves both alone,
// GOMEMLIMIT leaves the limit alone.
func TestPauseGCUntilResumedUnlessGOGCIsSet(t *testing.T) {
	origPercent := debug.SetGCPercent(100)
	origLimit := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetGCPercent(origPercent); debug.SetMemoryLimit(origLimit) })
	env := func(k, v string) func(string) string {
		return func(key string) string {
			if key == k {
				return v
			}
			return ""
		}
	}

	resume := pauseGC(env("", ""))
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("GC percent while starting = %d, want -1 (paused)", got)
	}
	if got := debug.SetMemoryLimit(-1); got != startupMemoryLimit {
		t.Errorf("memory limit while starting = %d, want %d", got, startupMemoryLimit)
	}
	resume()
	resume() // a second call changes nothing
	if got := debug.SetGCPercent(-1); got != 100 {
		t.Errorf("GC percent once resumed = %d, want 100 (as found)", got)
	}
	debug.SetGCPercent(100)
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("memory limit once resumed = %d, want the one found (none)", got)
	}

	debug.SetMemoryLimit(1 << 40)
	resume = pauseGC(env("GOMEMLIMIT", "1TiB"))
	if got := debug.SetMemoryLimit(-1); got != 1<<40 {
		t.Errorf("memory limit while starting with GOMEMLIMIT set = %d, want it unchanged", got)
	}
	resume()

	resume = pauseGC(env("GOGC", "50"))
	if got := debug.SetGCPercent(-1); got != 100 {
		t.Errorf("GC percent with GOGC set = %d, want 100 (unchanged)", got)
	}
	debug.SetGCPercent(100)
	resume()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GC percent with GOGC set, once resumed = %d, want 100 (unchanged)", got)
	}
}

// Started with StartupGCEnv, the collector was paused by the environment: resume sets
// Go's defaults (percent 100, no limit), once.
func TestPauseGCStartedPausedByTheEnvironment(t *testing.T) {
	origPercent := debug.SetGCPercent(-1) // as GOGC=off left it
	origLimit := debug.SetMemoryLimit(64 << 20)
	t.Cleanup(func() { debug.SetGCPercent(origPercent); debug.SetMemoryLimit(origLimit) })
	env := map[string]string{}
	for _, kv := range StartupGCEnv() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	if env["GOGC"] != "off" || env["GOMEMLIMIT"] == "" {
		t.Fatalf("StartupGCEnv = %v, want GOGC=off and a GOMEMLIMIT", StartupGCEnv())
	}
	resume := pauseGC(func(k string) string { return env[k] })
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("GC percent before resume = %d, want -1 (left paused)", got)
	}
	resume()
	if got := debug.SetGCPercent(50); got != 100 {
		t.Errorf("GC percent once resumed = %d, want 100", got)
	}
	resume() // a second call changes nothing
	if got := debug.SetGCPercent(100); got != 50 {
		t.Errorf("GC percent after a second resume = %d, want 50 (untouched)", got)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("memory limit once resumed = %d, want none", got)
	}
}

// The proxy's environment is the agent's without its own GC settings, plus
// StartupGCEnv.
func TestProxyCommandStartsWithTheCollectorPaused(t *testing.T) {
	t.Setenv("GOGC", "50")
	t.Setenv("GOMEMLIMIT", "1GiB")
	t.Setenv(StartGCEnv, "x")
	t.Setenv("MESHLAB_TEST_KEPT", "1")
	p := &envoyProxy{cfg: fixedPod()}
	cmd := p.command(0, fixedPod().settings(), proxyBinary{Path: "/bin/true"}, nil, nil)
	got := map[string][]string{}
	for _, kv := range cmd.Env {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = append(got[k], v)
	}
	for k, want := range map[string]string{"GOGC": "off", "GOMEMLIMIT": "64MiB", StartGCEnv: "paused", "MESHLAB_TEST_KEPT": "1"} {
		if len(got[k]) != 1 || got[k][0] != want {
			t.Errorf("proxy env %s = %v, want exactly [%s]", k, got[k], want)
		}
	}
}
