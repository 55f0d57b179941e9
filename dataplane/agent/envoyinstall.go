package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	funce "github.com/tetratelabs/func-e"
	funceapi "github.com/tetratelabs/func-e/api"
)

// InstallOptions configure InstallEnvoy.
type InstallOptions struct {
	Version     string    // optional: e.g. "1.36.2" or "1.36"; "" = func-e's latest from the versions manifest
	VersionsURL string    // optional: func-e's envoy-versions.json; "" = func-e's default (archive.tetratelabs.io)
	Home        string    // optional: func-e home (legacy layout, <home>/versions/<v>/bin/envoy); "" = $FUNC_E_HOME, else ~/.func-e
	Out         io.Writer // optional: func-e's progress messages
}

// InstallEnvoy installs Envoy with func-e's Go API and returns the installed binary's
// path, which the agent's discovery finds (FuncEVersionsDirs). func-e's API has no
// install-only call: it downloads the version if needed and then runs it, so Envoy is
// run with --version, which prints its version and exits.
func InstallEnvoy(ctx context.Context, o InstallOptions) (string, error) {
	if o.Home == "" {
		o.Home = os.Getenv(FuncEHomeEnv)
	}
	if o.Home == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("install envoy: find home directory: %w", err)
		}
		o.Home = filepath.Join(home, ".func-e")
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	opts := []funceapi.RunOption{funceapi.HomeDir(o.Home), funceapi.Out(o.Out)}
	if o.Version != "" {
		opts = append(opts, funceapi.EnvoyVersion(o.Version))
	}
	if o.VersionsURL != "" {
		opts = append(opts, funceapi.EnvoyVersionsURL(o.VersionsURL))
	}
	var envoyOut bytes.Buffer
	opts = append(opts, funceapi.EnvoyOut(&envoyOut), funceapi.EnvoyErr(&envoyOut))
	if err := funce.Run(ctx, []string{"--version"}, opts...); err != nil {
		return "", fmt.Errorf("install envoy %s with func-e: %w: %s", o.Version, err, strings.TrimSpace(envoyOut.String()))
	}
	dir := filepath.Join(o.Home, "versions")
	if o.Version != "" && strings.Count(o.Version, ".") == 2 {
		p := filepath.Join(dir, o.Version, "bin", "envoy")
		if isExecutable(p) {
			return p, nil
		}
	}
	if p, ok := findFuncEEnvoy([]string{dir}, os.ReadDir, isExecutable); ok {
		return p, nil
	}
	return "", errors.New("install envoy: func-e reported success but no envoy binary is under " + dir)
}
