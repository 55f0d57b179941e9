package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/demoapp/fortio"
)

// newFortioCmd is `meshlab fortio`, the fortio binary of the fortio/fortio image: `meshlab
// exec` runs it for `fortio ...` (or `/usr/bin/fortio ...`) in a pod of that image, as the
// circuit-breaking task runs `kubectl exec deploy/fortio -- fortio load ...`. Its
// arguments are fortio's own, so cobra does not parse them.
func newFortioCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "fortio load|curl [FLAGS] URL",
		Short:              "fortio's load and curl commands (internal; meshlab exec runs it in a fortio pod)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			if code := fortio.Main(args, os.Stdout, os.Stderr); code != 0 {
				os.Exit(code) // fortio's exit status, its message already printed
			}
			return nil
		},
	}
}
