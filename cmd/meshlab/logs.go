package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
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
	selector  string // -l: the pods whose labels match
}

func newLogsCmd(g *globalFlags) *cobra.Command {
	f := &logsFlags{}
	cmd := &cobra.Command{
		Use:   "logs POD|TYPE/NAME | -l SELECTOR",
		Short: "Print a pod's app, proxy or agent log (like kubectl logs)",
		Example: `  sudo meshlab logs backend-v1                 # the app
  sudo meshlab logs backend-v1 -c proxy -f     # follow the sidecar's log
  sudo meshlab logs -n istio-system deploy/istio-egressgateway -c istio-proxy
  sudo meshlab logs -n istio-system ds/ztunnel  # the lab's ztunnel (an ambient lab)
  sudo meshlab logs -l app=curl -c istio-proxy  # every matching pod's last 10 lines`,
		Args:              cobra.RangeArgs(0, 1),
		ValidArgsFunction: completePods(g, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (len(args) == 1) == (f.selector != "") {
				return errors.New("give one POD (or TYPE/NAME) or a selector -l, as kubectl logs")
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
			changed := cmd.Flags().Changed("container")
			if f.selector == "" {
				p, err := r.FindPod(args[0], f.namespace)
				if err != nil {
					return err
				}
				path, err := podLogPath(paths, p, f.container, changed)
				if err != nil {
					return err
				}
				return printLog(cmd.Context(), cmd.OutOrStdout(), path, f.tail, f.follow)
			}
			return printSelectedLogs(cmd, g, r, paths, f, changed)
		},
	}
	cmd.Flags().StringVarP(&f.selector, "selector", "l", "", "the logs of the pods whose labels match, as kubectl logs -l (last 10 lines of each unless --tail)")
	cmd.Flags().StringVarP(&f.container, "container", "c", "app", "which log: app, proxy (or istio-proxy) or agent")
	cmd.Flags().StringVarP(&f.namespace, "namespace", "n", "", "namespace of POD or TYPE/NAME (default: any)")
	cmd.Flags().BoolVarP(&f.follow, "follow", "f", false, "keep printing what is appended, until the lab stops or Ctrl-C")
	cmd.Flags().IntVar(&f.tail, "tail", -1, "print only the last N lines (-1: all)")
	return cmd
}

// podLogPath is the file of pod p's container log: app, proxy (istio-proxy) or agent.
// changed reports whether -c was given: a gateway pod's one container, istio-proxy, is
// its log without -c.
func podLogPath(paths lab.Paths, p lab.PodRecord, container string, changed bool) (string, error) {
	given := container
	if container == istioProxyContainer {
		container = "proxy" // kubectl's container name for the proxy's log
	}
	if p.Ztunnel {
		// The ztunnel pod's one container, istio-proxy, is ztunnel.
		if changed && container != "proxy" {
			return "", fmt.Errorf("-c %q: pod %s has one container, %s", given, p.Name, istioProxyContainer)
		}
		return lab.ZtunnelLogFile(paths), nil
	}
	if !slices.Contains(logContainers, container) {
		return "", fmt.Errorf("-c %q: choose one of %v (or %s)", given, logContainers, istioProxyContainer)
	}
	path := filepath.Join(paths.PodDir(p.Key), container+".log")
	if _, err := os.Stat(path); os.IsNotExist(err) && !changed {
		// A gateway pod has one container, istio-proxy: kubectl logs prints it
		// without -c, as `kubectl logs -l istio=egressgateway` in the tasks.
		if proxy := filepath.Join(paths.PodDir(p.Key), "proxy.log"); fileExists(proxy) {
			path = proxy
		}
	}
	return path, nil
}

// maxLogRequests is kubectl's --max-log-requests default: how many pods' logs one
// selector may follow at once.
const maxLogRequests = 5

// printSelectedLogs is kubectl logs -l: the logs of the pods in the namespace (default:
// default) whose labels match, one after another, the last 10 lines of each unless --tail
// says otherwise; with -f, followed together, a line at a time.
func printSelectedLogs(cmd *cobra.Command, g *globalFlags, r *lab.Record, paths lab.Paths, f *logsFlags, changed bool) error {
	ns := cmp.Or(f.namespace, "default")
	c, err := g.apiClient()
	if err != nil {
		return err
	}
	defer c.Close()
	objs, err := c.KubeObjects(cmd.Context(), "pod", ns, "", f.selector)
	if err != nil {
		return err
	}
	if len(objs) == 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "No resources found in %s namespace.\n", ns)
		return nil
	}
	if f.follow && len(objs) > maxLogRequests {
		return fmt.Errorf("you are attempting to follow %d log streams, but maximum allowed concurrency is %d, use --max-log-requests to increase the limit", len(objs), maxLogRequests)
	}
	var logPaths []string
	for _, o := range objs {
		p, err := r.FindPod(o.Name, o.Namespace)
		if err != nil {
			return err
		}
		path, err := podLogPath(paths, p, f.container, changed)
		if err != nil {
			return err
		}
		logPaths = append(logPaths, path)
	}
	tail := f.tail
	if !cmd.Flags().Changed("tail") {
		tail = 10
	}
	out := cmd.OutOrStdout()
	if !f.follow {
		for _, path := range logPaths {
			if err := printLog(cmd.Context(), out, path, tail, false); err != nil {
				return err
			}
		}
		return nil
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, len(logPaths))
	for i, path := range logPaths {
		wg.Go(func() {
			errs[i] = printLog(cmd.Context(), &lineWriter{mu: &mu, w: out}, path, tail, true)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// lineWriter passes whole lines to w under mu, so that logs followed together never
// interleave within a line.
type lineWriter struct {
	mu      *sync.Mutex
	w       io.Writer
	pending []byte
}

func (l *lineWriter) Write(b []byte) (int, error) {
	l.pending = append(l.pending, b...)
	i := bytes.LastIndexByte(l.pending, '\n')
	if i < 0 {
		return len(b), nil
	}
	l.mu.Lock()
	_, err := l.w.Write(l.pending[:i+1])
	l.mu.Unlock()
	l.pending = append(l.pending[:0], l.pending[i+1:]...)
	return len(b), err
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
