package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/lab"
	"github.com/meshlab/meshlab/lab/podcp"
	"github.com/meshlab/meshlab/netns"
)

func newCpCmd(g *globalFlags) *cobra.Command {
	var namespace, container string
	var noPreserve bool
	cmd := &cobra.Command{
		Use:   "cp SRC DEST",
		Short: "Copy files to and from a pod's app container (like kubectl cp): into the pod's own /tmp, out of anything it sees",
		Long: `Copy files and directories to and from a pod, as kubectl cp does: through tar run in the
pod's app container, as its uid. SRC and DEST are a local path and [[NAMESPACE/]POD:]PATH.
A meshlab pod's files are the host's, read-only to its app, but for its own /tmp (what the
pod writes there is its alone and goes with it): a copy into a pod goes under /tmp.`,
		Example: `  sudo meshlab cp ./ca.crt sleep-5d8f9c7b6-x2x9q:/tmp/
  sudo meshlab cp client.key default/sleep-5d8f9c7b6-x2x9q:/tmp/
  sudo meshlab cp example.com.crt default/sleep-5d8f9c7b6-x2x9q:/tmp/ca.crt
  sudo meshlab cp test/httpbin-6c5b7d8f9-abcde:/etc/hosts ./hosts`,
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: completePods(g, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			from, to, err := podcp.ParseArgs(args[0], args[1])
			if err != nil {
				return err
			}
			remote := to
			if from.Remote() {
				remote = from
			}
			if container == istioProxyContainer {
				return fmt.Errorf("cp -c %s: the sidecar's container has no filesystem of its own in meshlab (its commands run in the host's); copy to or from the pod's app container (no -c)", container)
			}
			if !from.Remote() {
				if err := podcp.CheckDest(to.File); err != nil {
					return err
				}
			}
			if err := requireRoot("meshlab cp"); err != nil {
				return err
			}
			name, err := g.existingLab()
			if err != nil {
				return err
			}
			r, err := lab.ReadRecord(lab.PathsFor(g.runRoot, name))
			if err != nil {
				return fmt.Errorf("lab %s: %w", name, err)
			}
			ns := remote.Namespace
			if ns == "" {
				ns = namespace
			}
			p, err := r.FindPod(remote.Pod, ns)
			if err != nil {
				return err
			}
			if _, _, ok, err := netns.PodInit(p.NetNS); err != nil {
				return err
			} else if !ok {
				return fmt.Errorf("pod %s has no app container to copy to or from (a gateway's or ztunnel's only process is its proxy)", p.Name)
			}
			run := podRunner(p.NetNS)
			if from.Remote() {
				return podcp.FromPod(cmd.Context(), run, from.File, to.File, cmd.ErrOrStderr())
			}
			return podcp.ToPod(cmd.Context(), run, from.File, to.File, noPreserve, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace of POD when the file spec names none (default: any)")
	cmd.Flags().StringVarP(&container, "container", "c", "", "container: the pod's app container (any name but istio-proxy, which has no filesystem of its own here)")
	cmd.Flags().BoolVar(&noPreserve, "no-preserve", false, "the copied files' ownership and permissions are not preserved in the container (tar --no-same-permissions --no-same-owner)")
	return cmd
}

// podRunner runs a command in the app container of the pod of network namespace ns as
// meshlab exec does (netns.Run: its namespaces, its uid and restrictions), with the given
// streams; it dies with meshlab.
func podRunner(ns string) podcp.Runner {
	return func(_ context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
		prepare := func(c *exec.Cmd) {
			c.Stdin, c.Stdout, c.Stderr = stdin, stdout, stderr
			c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		}
		err := netns.Run(ns, argv, os.Environ(), false, prepare, func(*os.Process) {})
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("command terminated with exit code %d", ee.ExitCode())
		}
		return err
	}
}
