package main

import (
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/lab"
)

// portForwardConfig holds `meshlab port-forward`'s flags.
type portForwardConfig struct {
	namespace string
	address   string
}

func newPortForwardCmd(g *globalFlags) *cobra.Command {
	var cfg portForwardConfig
	cmd := &cobra.Command{
		Use:   "port-forward TYPE/NAME [LOCAL_PORT:]REMOTE_PORT...",
		Short: "Forward local ports to a pod or Service of the lab (like kubectl port-forward), on 127.0.0.1 only",
		Long: `Forward local ports to a pod, as kubectl port-forward does: connections to the local
port (on 127.0.0.1) are copied to the pod's port, dialled from inside the lab's node
namespace. A Service's port is its target port on the first pod it selects. Nothing is
routed between the host and the lab; forwarding stops with Ctrl-C.`,
		Example: `  sudo meshlab port-forward -n istio-system svc/istio-ingressgateway 8080:80 &
  export GATEWAY_URL=127.0.0.1:8080
  curl -s "http://$GATEWAY_URL/productpage"`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireRoot("meshlab port-forward"); err != nil {
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
			addr, err := netip.ParseAddr(cfg.address)
			if err != nil {
				return fmt.Errorf("--address %q: %w", cfg.address, err)
			}
			pfc := lab.PortForwardConfig{Record: r, Namespace: cfg.namespace, Target: args[0], Address: addr, Out: cmd.OutOrStdout()}
			for _, a := range args[1:] {
				m, err := lab.ParsePortMapping(a)
				if err != nil {
					return err
				}
				pfc.Ports = append(pfc.Ports, m)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return lab.PortForward(ctx, pfc)
		},
	}
	cmd.Flags().StringVarP(&cfg.namespace, "namespace", "n", "default", "namespace of TYPE/NAME")
	cmd.Flags().StringVar(&cfg.address, "address", "127.0.0.1", "local address to listen on (loopback only)")
	return cmd
}
