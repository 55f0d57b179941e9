package main

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
	"github.com/meshlab/meshlab/lab"
)

// proxyLogLevels are the levels istioctl proxy-config log takes, as Envoy names them.
var proxyLogLevels = []string{"trace", "debug", "info", "warning", "error", "critical", "off"}

// proxyLogAll is istioctl's name for "every logger" in --level's logger:level form.
const proxyLogAll = "level"

// newProxyConfigLogCmd is istioctl proxy-config log: the logging levels of a pod's proxy,
// read or set through its admin API's POST /logging, as the authorization pages run it
// (`istioctl proxy-config log deploy/httpbin.foo --level "rbac:debug"`). It prints what
// istioctl prints: the pod as NAME.NAMESPACE, then the proxy's active loggers.
func newProxyConfigLogCmd(g *globalFlags, cfg *pcConfig) *cobra.Command {
	var level string
	var reset bool
	cmd := &cobra.Command{
		Use:     "log POD|TYPE/NAME[.NAMESPACE] [--level [LOGGER:]LEVEL,...] [-r]",
		Aliases: []string{"o"},
		Short:   "Show or set the logging levels of a pod's proxy, as istioctl proxy-config log",
		Example: `  meshlab proxy-config log deploy/httpbin.foo --level rbac:debug
  meshlab proxy-config log productpage-v1 --level warning
  meshlab proxy-config log productpage-v1 -r`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("log requires a pod name")
			}
			if reset && level != "" {
				return fmt.Errorf("--level cannot be combined with --reset")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			paths, key, err := g.podPathsIn(args[0], cfg.namespace, true)
			if err != nil {
				return err
			}
			r, err := lab.ReadRecord(paths)
			if err != nil {
				return err
			}
			p, err := r.FindPod(args[0], cfg.namespace)
			if err != nil {
				return err
			}
			c := agentapi.NewClient(paths.AgentSocket(key))
			defer c.Close()
			current, err := c.AdminPost(cmd.Context(), "logging")
			if err != nil {
				return fmt.Errorf("error configuring log level for %s.%s: %w", p.Name, p.Namespace, err)
			}
			want, err := proxyLogChanges(level, reset, string(current))
			if err != nil {
				return err
			}
			resp := current
			// Every logger first, then the named ones, as istioctl sends them.
			names := slices.Sorted(maps.Keys(want))
			if i := slices.Index(names, proxyLogAll); i > 0 {
				names = append([]string{proxyLogAll}, slices.Delete(names, i, i+1)...)
			}
			for _, lg := range names {
				if resp, err = c.AdminPost(cmd.Context(), "logging?"+lg+"="+want[lg]); err != nil {
					return fmt.Errorf("error configuring log level for %s.%s: %w", p.Name, p.Namespace, err)
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s.%s:\n%s", p.Name, p.Namespace, resp)
			return nil
		},
	}
	cmd.Flags().StringVar(&level, "level", "", "comma-separated [LOGGER:]LEVEL, or LEVEL for every logger; levels: "+strings.Join(proxyLogLevels, ", "))
	cmd.Flags().BoolVarP(&reset, "reset", "r", false, "reset every logger to the default level (warning)")
	return cmd
}

// proxyLogChanges reads --level (or --reset) as istioctl does: LEVEL sets every logger,
// LOGGER:LEVEL (or LOGGER=LEVEL) one of the proxy's loggers, named in its /logging
// answer current; it returns the changes, proxyLogAll for every logger.
func proxyLogChanges(level string, reset bool, current string) (map[string]string, error) {
	out := map[string]string{}
	if reset {
		out[proxyLogAll] = "warning"
		return out, nil
	}
	if level == "" {
		return out, nil
	}
	for _, part := range strings.Split(level, ",") {
		if !strings.ContainsAny(part, ":=") {
			if !slices.Contains(proxyLogLevels, part) {
				return nil, fmt.Errorf("unrecognized logging level: %v", part)
			}
			clear(out)
			out[proxyLogAll] = part
			continue
		}
		parts := strings.Split(part, "::") // a namespace-qualified logger: its last part
		lg := regexp.MustCompile(`[:=]`).Split(parts[len(parts)-1], 2)
		if lg[0] != proxyLogAll && !strings.Contains(current, "  "+lg[0]+": ") {
			return nil, fmt.Errorf("unrecognized logger name: %v (this proxy's loggers: %s)", lg[0], strings.Join(proxyLoggers(current), ", "))
		}
		if !slices.Contains(proxyLogLevels, lg[1]) {
			return nil, fmt.Errorf("unrecognized logging level: %v", lg[1])
		}
		out[lg[0]] = lg[1]
	}
	return out, nil
}

// proxyLoggers are the logger names of a /logging answer ("active loggers:\n  NAME: LEVEL").
func proxyLoggers(answer string) []string {
	var out []string
	for _, line := range strings.Split(answer, "\n") {
		if name, _, ok := strings.Cut(strings.TrimSpace(line), ": "); ok && strings.HasPrefix(line, "  ") {
			out = append(out, name)
		}
	}
	return out
}
