package main

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// newPilotAgentCmd is `meshlab pilot-agent`, the pilot-agent binary of the istio-proxy
// container for what a learner runs in it: `meshlab exec POD -c istio-proxy --
// pilot-agent request GET stats` runs it in the pod's network namespace, as the
// circuit-breaking task runs `kubectl exec POD -c istio-proxy -- pilot-agent request GET
// stats`. The pod's agent itself is `meshlab agent`.
func newPilotAgentCmd() *cobra.Command {
	root := &cobra.Command{
		Use:    "pilot-agent",
		Short:  "pilot-agent's request command (internal; meshlab exec -c istio-proxy runs it)",
		Hidden: true,
	}
	var debugPort uint16
	req := &cobra.Command{
		Use:   "request METHOD PATH [BODY]",
		Short: "send a request to the proxy's admin API (Envoy's, on localhost) and print the answer",
		Args:  cobra.RangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			method := strings.ToUpper(args[0])
			path := strings.TrimPrefix(args[1], "/")
			var body io.Reader
			if len(args) == 3 {
				body = strings.NewReader(args[2])
			}
			url := "http://127.0.0.1:" + strconv.Itoa(int(debugPort)) + "/" + path
			r, err := http.NewRequestWithContext(cmd.Context(), method, url, body)
			if err != nil {
				return fmt.Errorf("request %s %s: %w", method, path, err)
			}
			resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(r)
			if err != nil {
				return fmt.Errorf("request %s %s to the proxy's admin API: %w", method, path, err)
			}
			defer resp.Body.Close()
			if _, err := io.Copy(cmd.OutOrStdout(), resp.Body); err != nil {
				return fmt.Errorf("request %s %s: read answer: %w", method, path, err)
			}
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("request %s %s: the proxy answered %s", method, path, resp.Status)
			}
			return nil
		},
	}
	req.Flags().Uint16Var(&debugPort, "debug-port", 15000, "the proxy's admin port")
	root.AddCommand(req)
	return root
}
