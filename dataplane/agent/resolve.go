package agent

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
)

// EnvoyEnv names the environment variable that points at an envoy binary.
const EnvoyEnv = "MESHLAB_ENVOY"

// proxyBinary is the data plane one pod runs: Path plus Prefix before Envoy's flags
// (["proxy"] for `meshlab proxy`, nothing for envoy).
type proxyBinary struct {
	Path      string
	Prefix    []string
	DataPlane string // DataPlaneEnvoy or DataPlaneMeshlabProxy
}

// lookup is the part of the OS that proxy resolution reads; tests pass fakes. A nil
// readDir or isExec skips func-e's install directories.
type lookup struct {
	getenv     func(string) string
	lookPath   func(string) (string, error)
	executable func() (string, error)
	home       func() (string, error)
	readDir    func(string) ([]os.DirEntry, error)
	isExec     func(string) bool
}

var osLookup = lookup{getenv: os.Getenv, lookPath: exec.LookPath, executable: os.Executable,
	home: os.UserHomeDir, readDir: os.ReadDir, isExec: isExecutable}

// errNoEnvoy is a data plane choice of envoy when no Envoy binary can be found.
var errNoEnvoy = errors.New("data plane envoy was chosen but no envoy binary was found (set sidecar.proxyPath, $MESHLAB_ENVOY, put envoy on PATH, or run meshlab envoy install)")

// resolveProxy picks the data plane: ProxyPath if set; else $MESHLAB_ENVOY; else envoy on
// PATH; else the newest Envoy func-e installed (see FuncEVersionsDirs); else MeshlabPath
// (or this executable) with the `proxy` verb. c.DataPlane narrows the choice: "meshlab"
// always takes the built-in proxy, "envoy" fails with errNoEnvoy rather than fall back.
func resolveProxy(c Config, l lookup) (proxyBinary, error) {
	if c.DataPlane == agentapi.DataPlaneChoiceMeshlab {
		return builtinProxy(c, l)
	}
	if c.ProxyPath != "" {
		return proxyBinary{Path: c.ProxyPath, DataPlane: agentapi.DataPlaneEnvoy}, nil
	}
	if p := l.getenv(EnvoyEnv); p != "" {
		return proxyBinary{Path: p, DataPlane: agentapi.DataPlaneEnvoy}, nil
	}
	if p, err := l.lookPath("envoy"); err == nil {
		return proxyBinary{Path: p, DataPlane: agentapi.DataPlaneEnvoy}, nil
	}
	if l.readDir != nil && l.isExec != nil {
		home := ""
		if l.home != nil {
			home, _ = l.home()
		}
		if p, ok := findFuncEEnvoy(FuncEVersionsDirs(l.getenv, home), l.readDir, l.isExec); ok {
			return proxyBinary{Path: p, DataPlane: agentapi.DataPlaneEnvoy}, nil
		}
	}
	if c.DataPlane == agentapi.DataPlaneChoiceEnvoy {
		return proxyBinary{}, errNoEnvoy
	}
	return builtinProxy(c, l)
}

// builtinProxy is `meshlab proxy`: MeshlabPath, or this executable.
func builtinProxy(c Config, l lookup) (proxyBinary, error) {
	self := c.MeshlabPath
	if self == "" {
		p, err := l.executable()
		if err != nil {
			return proxyBinary{}, fmt.Errorf("find meshlab executable for the built-in proxy: %w", err)
		}
		self = p
	}
	return proxyBinary{Path: self, Prefix: []string{"proxy"}, DataPlane: agentapi.DataPlaneMeshlabProxy}, nil
}

// versionTimeout bounds `<proxy> --version`.
const versionTimeout = 5 * time.Second

// proxyVersion runs `<bin> --version` through l and returns the first non-empty line of
// its output.
func proxyVersion(ctx context.Context, b proxyBinary, l launcher) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	args := append(append([]string{}, b.Prefix...), "--version")
	cmd := exec.CommandContext(ctx, b.Path, args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := l.Start(cmd); err != nil {
		return "", fmt.Errorf("start %s --version: %w", b.Path, err)
	}
	if err := cmd.Wait(); err != nil {
		return "", fmt.Errorf("run %s --version: %w: %s", b.Path, err, strings.TrimSpace(out.String()))
	}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			return line, nil
		}
	}
	return "", errors.New("empty --version output")
}
