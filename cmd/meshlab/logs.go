package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/lab"
)

// logContainers are the logs each pod keeps, named like the containers of an Istio pod's
// roles: the app, the proxy (istio-proxy's Envoy) and the agent (pilot-agent).
var logContainers = []string{"app", "proxy", "agent"}

type logsFlags struct {
	container string
	namespace string
	follow    bool
	tail      int
}

func newLogsCmd(g *globalFlags) *cobra.Command {
	f := &logsFlags{}
	cmd := &cobra.Command{
		Use:   "logs POD|TYPE/NAME",
		Short: "Print a pod's app, proxy or agent log (like kubectl logs)",
		Example: `  sudo meshlab logs backend-v1                 # the app
  sudo meshlab logs backend-v1 -c proxy -f     # follow the sidecar's log
  sudo meshlab logs -n istio-system deploy/istio-egressgateway -c istio-proxy
  sudo meshlab logs -n istio-system ds/ztunnel  # the lab's ztunnel (an ambient lab)`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completePods(g, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			container := f.container
			if container == istioProxyContainer {
				container = "proxy" // kubectl's container name for the proxy's log
			}
			name, err := g.existingLab()
			if err != nil {
				return err
			}
			paths := lab.PathsFor(g.runRoot, name)
			r, err := lab.ReadRecord(paths)
			if err != nil {
				return fmt.Errorf("lab %s: %w", name, err)
			}
			p, err := r.FindPod(args[0], f.namespace)
			if err != nil {
				return err
			}
			if p.Ztunnel {
				// The ztunnel pod's one container, istio-proxy, is ztunnel.
				if cmd.Flags().Changed("container") && container != "proxy" {
					return fmt.Errorf("-c %q: pod %s has one container, %s", f.container, p.Name, istioProxyContainer)
				}
				return printLog(cmd.Context(), cmd.OutOrStdout(), lab.ZtunnelLogFile(paths), f.tail, f.follow)
			}
			if !slices.Contains(logContainers, container) {
				return fmt.Errorf("-c %q: choose one of %v (or %s)", f.container, logContainers, istioProxyContainer)
			}
			path := filepath.Join(paths.PodDir(p.Key), container+".log")
			if _, err := os.Stat(path); os.IsNotExist(err) && !cmd.Flags().Changed("container") {
				// A gateway pod has one container, istio-proxy: kubectl logs prints it
				// without -c, as `kubectl logs -l istio=egressgateway` in the tasks.
				if proxy := filepath.Join(paths.PodDir(p.Key), "proxy.log"); fileExists(proxy) {
					path = proxy
				}
			}
			return printLog(cmd.Context(), cmd.OutOrStdout(), path, f.tail, f.follow)
		},
	}
	cmd.Flags().StringVarP(&f.container, "container", "c", "app", "which log: app, proxy (or istio-proxy) or agent")
	cmd.Flags().StringVarP(&f.namespace, "namespace", "n", "", "namespace of POD or TYPE/NAME (default: any)")
	cmd.Flags().BoolVarP(&f.follow, "follow", "f", false, "keep printing what is appended, until the lab stops or Ctrl-C")
	cmd.Flags().IntVar(&f.tail, "tail", -1, "print only the last N lines (-1: all)")
	return cmd
}

// printLog writes the last tail lines of the file at path (all when tail < 0) to w and,
// with follow, whatever is appended afterwards, until ctx ends or the file goes away
// (the lab was removed).
func printLog(ctx context.Context, w io.Writer, path string, tail int, follow bool) error {
	f, err := os.Open(path)
	if os.IsNotExist(err) && follow {
		// The process may not have written yet: wait for the file.
		for os.IsNotExist(err) {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(200 * time.Millisecond):
			}
			f, err = os.Open(path)
		}
	}
	if err != nil {
		return fmt.Errorf("read log: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("read log: %w", err)
	}
	if _, err := w.Write(lastLines(data, tail)); err != nil {
		return err
	}
	if !follow {
		return nil
	}
	buf := make([]byte, 32*1024)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			continue
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("follow log: %w", err)
		}
		if _, serr := os.Stat(path); os.IsNotExist(serr) {
			return nil // the lab is gone
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// lastLines returns the last n lines of data (all of it when n < 0).
func lastLines(data []byte, n int) []byte {
	if n < 0 {
		return data
	}
	end := len(data)
	if end > 0 && data[end-1] == '\n' {
		end--
	}
	start := end
	for i := 0; i < n; i++ {
		j := bytes.LastIndexByte(data[:start], '\n')
		if j < 0 {
			return data
		}
		start = j
		if start == 0 {
			break
		}
	}
	if n == 0 {
		return nil
	}
	return data[start+1:]
}

// fileExists reports whether path names an existing file.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
