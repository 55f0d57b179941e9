package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/lab"
	"github.com/meshlab/meshlab/netns"
)

func newExecCmd(g *globalFlags) *cobra.Command {
	var privileged bool
	cmd := &cobra.Command{
		Use:   "exec POD|TYPE/NAME -- COMMAND [ARGS...]",
		Short: "Run a command in a pod as its app runs: its namespaces, uid and restrictions (like kubectl exec)",
		Example: `  sudo meshlab exec frontend-v1 -- curl -s http://backend:8080/
  sudo meshlab exec deploy/curl -- curl -s http://httpbin:8000/headers
  sudo meshlab exec backend-v1 -- ss -tlnp
  sudo meshlab exec --privileged frontend-v1 -- iptables-save -t nat`,
		Args:              cobra.MinimumNArgs(2),
		ValidArgsFunction: completePods(g, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireRoot("meshlab exec"); err != nil {
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
			p, err := r.FindPod(args[0], "")
			if err != nil {
				return err
			}
			if privileged {
				return netns.ExecPrivileged(p.NetNS, args[1:], os.Environ())
			}
			return netns.Exec(p.NetNS, args[1:], os.Environ())
		},
	}
	cmd.Flags().BoolVar(&privileged, "privileged", false, "run as root with every capability in the pod's network namespace only, not as the pod's app (iptables-save, tcpdump)")
	return cmd
}
