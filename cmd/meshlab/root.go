package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/lab"
)

// globalFlags are the flags every verb shares.
type globalFlags struct {
	// name is the lab a verb acts on, from --lab or (for compatibility) --name; "" for
	// the default lab (see labName).
	name     string
	lab      string // --lab, copied into name before any verb runs
	runRoot  string
	logLevel string
}

func (g *globalFlags) logger() *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(strings.ToUpper(g.logLevel))); err != nil {
		lvl = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
}

// labName resolves --lab (or --name) to a lab: the named one, else the default lab
// (defaultLab).
func (g *globalFlags) labName() (string, error) {
	if g.name != "" {
		return g.name, lab.ValidateName(g.name)
	}
	return defaultLab(g.runRoot, lab.CallerUID())
}

// selectLab copies --lab into name; --lab and --name naming different labs is an error.
func (g *globalFlags) selectLab() error {
	if g.lab == "" {
		return nil
	}
	if g.name != "" && g.name != g.lab {
		return fmt.Errorf("--lab %s and --name %s name different labs: use --lab alone", g.lab, g.name)
	}
	g.name = g.lab
	return nil
}

// existingLab is labName for verbs that read a lab: a --name that names no lab is an
// error listing the labs present (never a raw "open .../lab.json"), and a lab whose run
// directory is there but whose process is gone says how to clean it.
func (g *globalFlags) existingLab() (string, error) {
	name, err := g.labName()
	if errors.Is(err, lab.ErrNoLab) {
		return "", errors.New("no lab is running (start one with: sudo meshlab up)")
	}
	if err != nil {
		return "", err
	}
	p := lab.PathsFor(g.runRoot, name)
	if _, err := os.Stat(p.Dir); errors.Is(err, fs.ErrNotExist) {
		known, _ := lab.Known(g.runRoot)
		return "", &lab.NoSuchLabError{Name: name, Known: known}
	}
	if !lab.Running(p) {
		return "", fmt.Errorf("lab %s is not running; remove what it left with: sudo meshlab clean --lab %s", name, name)
	}
	return name, nil
}

func newRootCmd() *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:   "meshlab",
		Short: "A real service mesh on one Linux machine, in about a second",
		Long: `meshlab creates network namespaces as pods, captures their traffic with iptables
the way istio-init does, serves xDS the way istiod does, and runs one agent and one
sidecar proxy per pod. No Kubernetes, no containers.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			return g.selectLab()
		},
	}
	root.PersistentFlags().StringVar(&g.lab, "lab", "", "the lab to act on (default: the only lab you started; up: \"default\")")
	root.PersistentFlags().StringVar(&g.name, "name", "", "the lab to act on, as --lab (kept for compatibility; in proxy-config, --name filters routes)")
	root.PersistentFlags().StringVar(&g.runRoot, "run-root", lab.DefaultRunRoot, "where labs keep their run directories")
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "warn", "log level: debug, info, warn, error")
	root.AddCommand(
		newUpCmd(g), newDownCmd(g), newCleanCmd(g), newStatusCmd(g), newExecCmd(g), newCpCmd(g),
		newApplyCmd(g), newGetCmd(g), newDeleteCmd(g), newProxyStatusCmd(g),
		newFaultCmd(g), newHistoryCmd(g), newDiffCmd(g),
		newAgentCmd(), newProxyCmd(g), newAppCmd(), newDescribeCmd(g), newEnvoyCmd(),
		newDashboardCmd(g), newLogsCmd(g), newProxyConfigCmd(g), newAnalyzeCmd(g), newCompletionCmd(g),
		newLabCmd(g), newReproCmd(g), newCACmd(g), newTraceCmd(g),
		newPortForwardCmd(g), newWaitCmd(g), newLabelCmd(g), newAnnotateCmd(g), newPatchCmd(g), newEditCmd(g), newCreateCmd(g), newVersionCmd(g), newFortioCmd(), newNcCmd(), newPilotAgentCmd(),
		newZtunnelCmd(), newZtunnelConfigCmd(g), newXCmd(g), newWaypointCmd(g), newInstallCmd(g), newUninstallCmd(g), newKubeInjectCmd(),
		newRolloutCmd(g), // rollout.go
	)
	registerCompletions(root, g)
	return root
}

func requireRoot(verb string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s needs root (network namespaces and iptables): run it with sudo", verb)
	}
	return nil
}

// podPaths resolves the lab and checks that it has pod (with a sidecar, when sidecar is
// set), returning the lab's paths; the error lists the pods it does have.
func (g *globalFlags) podPaths(pod string, sidecar bool) (lab.Paths, string, error) {
	return g.podPathsIn(pod, "", sidecar)
}

// podPathsIn is podPaths for a pod of namespace (-n; "" reads pod as FindPod does: a
// name, or istioctl's NAME.NAMESPACE).
func (g *globalFlags) podPathsIn(pod, namespace string, sidecar bool) (lab.Paths, string, error) {
	name, err := g.existingLab()
	if err != nil {
		return lab.Paths{}, "", err
	}
	paths := lab.PathsFor(g.runRoot, name)
	r, err := lab.ReadRecord(paths)
	if err != nil {
		return lab.Paths{}, "", fmt.Errorf("lab %s: %w", name, err)
	}
	var pods []string
	for _, p := range r.Pods {
		if p.Sidecar || !sidecar {
			pods = append(pods, p.Key)
		}
	}
	p, err := r.FindPod(pod, namespace)
	if err != nil {
		return lab.Paths{}, "", err
	}
	if sidecar && !p.Sidecar {
		return lab.Paths{}, "", fmt.Errorf("pod %q in lab %s has no sidecar (pods with one: %s)", pod, name, validList(pods))
	}
	return paths, p.Key, nil
}
