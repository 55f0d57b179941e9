package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
	"github.com/meshlab/meshlab/lab"
	"github.com/meshlab/meshlab/lab/promserver"
	"github.com/meshlab/meshlab/netns"
)

// dashboardFlags are istioctl dashboard's flags.
type dashboardFlags struct {
	address string // --address: localhost or a loopback IP
	port    int    // -p: the local port (0: the UI's own port, else a free one)
	browser bool   // --browser: istioctl opens a browser; meshlab never does (it runs as root)
}

func newDashboardCmd(g *globalFlags) *cobra.Command {
	f := &dashboardFlags{}
	cmd := &cobra.Command{
		Use:   "dashboard [prometheus|envoy POD|proxy POD|grafana|kiali|jaeger|zipkin|controlz]",
		Short: "Print the running lab's dashboard URL, or serve an Istio UI on localhost as istioctl dashboard",
		Long: `Without a component, dashboard prints the lab's own dashboard URL (with its login
token). With one, it is istioctl dashboard: it serves the component on localhost (its own
port, else a free one), prints its URL and serves until Ctrl-C.

  prometheus      the Prometheus of samples/addons/prometheus.yaml (Debian's prometheus
                  in the addon's pod, scraping the lab's proxies and ztunnel); without
                  the addon, the lab's merged metrics at /metrics
  envoy|proxy POD the pod's proxy admin (Envoy's admin API, read-only)
  jaeger, zipkin   the pod of samples/addons/jaeger.yaml (extras/zipkin.yaml): meshlab's
                  span store, which takes the proxies' Zipkin spans and answers Jaeger's
                  (/jaeger/api) and Zipkin's (/api/v2) query APIs, with no UI of its own
  grafana         the pod of samples/addons/grafana.yaml: Grafana's HTTP API (/api/search,
                  /api/dashboards/uid/..., the data source proxy to the lab's
                  Prometheus) on the sample's dashboards, with no UI
  kiali           the pod of samples/addons/kiali.yaml: Kiali's graph API
                  (/kiali/api/namespaces/graph, from the lab's Prometheus) and its
                  Services' validations (KIA0601), no UI
  skywalking      the pod of the samples/addons file (its app runs
                  meshlab's demo app); without it istioctl's "no pods found"
  controlz        refused with the reason`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			name, err := g.labName()
			if err != nil {
				return err
			}
			p := lab.PathsFor(g.runRoot, name)
			if !lab.Running(p) {
				return fmt.Errorf("lab %s is not running", name)
			}
			u, err := lab.ReadDashboardURL(p)
			if err != nil {
				return fmt.Errorf("lab %s serves no dashboard (started with --listen \"\"?): %w", name, err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), u)
			return nil
		},
	}
	cmd.PersistentFlags().IntVarP(&f.port, "port", "p", 0, "local port to listen on (default: the component's own, else a free one)")
	cmd.PersistentFlags().StringVar(&f.address, "address", "localhost", "address to listen on: localhost or a loopback IP (a lab is reached from this host only)")
	cmd.PersistentFlags().BoolVar(&f.browser, "browser", true, "istioctl's: open a browser (meshlab never does, it runs as root; it prints the URL)")
	cmd.AddCommand(newPrometheusDashCmd(g, f))
	for _, use := range []string{"envoy", "proxy"} {
		cmd.AddCommand(newProxyDashCmd(g, f, use))
	}
	for _, a := range addonUIs {
		cmd.AddCommand(newAddonDashCmd(g, f, a))
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "controlz",
		Short: "Refused: " + controlzRefusal,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("dashboard controlz: %s", controlzRefusal)
		},
		DisableFlagParsing: true,
	})
	return cmd
}

// addonUI is an istioctl dashboard of one of Istio's samples/addons: istioctl finds the
// first pod of selector in istio-system, then in the namespace (-n, default), forwards
// its port and prints the URL.
type addonUI struct {
	name, selector string
	port           int
	path           string // after the address in the URL istioctl prints ("/kiali")
}

// addonUIs are istioctl's addon dashboards other than Prometheus (which a lab runs).
var addonUIs = []addonUI{
	{"grafana", "app.kubernetes.io/name=grafana", 3000, ""},
	{"kiali", "app=kiali", 20001, "/kiali"},
	{"jaeger", "app=jaeger", 16686, ""},
	{"zipkin", "app=zipkin", 9411, ""},
	{"skywalking", "app=skywalking-ui", 8080, ""},
}

const controlzRefusal = "meshlab's control plane serves no ControlZ; its state is `meshlab proxy-status`, `meshlab x istiod-debug` and the lab's dashboard"

// newAddonDashCmd is istioctl dashboard NAME for an addon: without the addon's pod,
// istioctl's "Error: no pods found with selector ..."; with it (its samples/addons file
// applied), a forward of the pod's port, printing istioctl's URL. The addon's image has
// no persona in meshlab, so the pod runs the demo app (it answers with an echo of the
// request): meshlab says so on stderr.
func newAddonDashCmd(g *globalFlags, f *dashboardFlags, a addonUI) *cobra.Command {
	var uiPort int
	var namespace string
	cmd := &cobra.Command{
		Use:   a.name,
		Short: fmt.Sprintf("Forward http://localhost:%d%s to the pod of samples/addons/%s.yaml until Ctrl-C (%s)", a.port, a.path, a.name, a.selector),
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			name, p, err := addonPod(cmd.Context(), g, a.selector, cmp.Or(namespace, "default"))
			if err != nil {
				return err
			}
			if p.Persona == "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "meshlab: pod %s.%s runs meshlab's demo app, not %s (the addon's image has no persona): it answers with an echo of each request; the mesh's graph and metrics are in `meshlab dashboard`\n", p.Name, p.Namespace, a.name)
			}
			return serveDashboardAt(cmd, f, uiPort, a.path, podForward(name, netip.AddrPortFrom(p.IP, uint16(a.port)).String()))
		},
	}
	cmd.Flags().IntVar(&uiPort, "ui-port", a.port, "the component's port")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace to look in after istio-system (default: default)")
	return cmd
}

// addonPod finds the addon's pod as istioctl does: the first pod matching selector in
// istio-system, then in namespace; without one, istioctl's error. It returns the lab's
// name and the pod's record.
func addonPod(ctx context.Context, g *globalFlags, selector, namespace string) (string, lab.PodRecord, error) {
	c, err := g.apiClient()
	if err != nil {
		return "", lab.PodRecord{}, err
	}
	defer c.Close()
	for _, ns := range []string{"istio-system", namespace} {
		pods, err := c.KubeObjects(ctx, "pod", ns, "", selector)
		if err != nil {
			return "", lab.PodRecord{}, err
		}
		if len(pods) == 0 {
			continue
		}
		name, err := g.existingLab()
		if err != nil {
			return "", lab.PodRecord{}, err
		}
		r, err := lab.ReadRecord(lab.PathsFor(g.runRoot, name))
		if err != nil {
			return "", lab.PodRecord{}, fmt.Errorf("lab %s: %w", name, err)
		}
		p, err := r.FindPod(pods[0].Name, pods[0].Namespace)
		if err == nil && !p.IP.IsValid() {
			err = fmt.Errorf("failure running port forward process: pod %s has no IP yet", p.Name)
		}
		return name, p, err
	}
	return "", lab.PodRecord{}, errors.New(istioctlErrorPrefix + "no pods found with selector " + selector)
}

func newPrometheusDashCmd(g *globalFlags, f *dashboardFlags) *cobra.Command {
	var uiPort int
	cmd := &cobra.Command{
		Use:   "prometheus",
		Short: "Forward http://localhost:9090 to the Prometheus addon's pod until Ctrl-C (without the addon: the lab's merged metrics at /metrics)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			name, err := g.existingLab()
			if err != nil {
				return err
			}
			if h, ok, err := prometheusPod(g, name); err != nil || ok {
				if err != nil {
					return err
				}
				return serveDashboard(cmd, f, uiPort, h)
			}
			sock := lab.PathsFor(g.runRoot, name).APISocket()
			rp := &httputil.ReverseProxy{
				Rewrite: func(r *httputil.ProxyRequest) {
					r.SetURL(&url.URL{Scheme: "http", Host: "lab"})
				},
				Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
					var d net.Dialer
					return d.DialContext(ctx, "unix", sock)
				}},
			}
			mux := http.NewServeMux()
			mux.Handle("GET /metrics", rp)
			mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				fmt.Fprintf(w, "Lab %s runs no Prometheus server: /metrics is every proxy's and ztunnel's metrics, merged as Prometheus would scrape them.\n", name)
			})
			fmt.Fprintf(cmd.ErrOrStderr(), "lab %s runs no Prometheus server: serving the lab's merged metrics at /metrics (PromQL queries need a Prometheus)\n", name)
			return serveDashboard(cmd, f, uiPort, mux)
		},
	}
	cmd.Flags().IntVar(&uiPort, "ui-port", 9090, "the component's port")
	return cmd
}

// prometheusPod is a reverse proxy to port 9090 of the lab's Prometheus addon pod (the
// one running Debian's prometheus), dialled in the lab's node namespace as port-forward
// does, as istioctl forwards to the pod labelled app.kubernetes.io/name=prometheus; ok
// is false when the lab has none.
func prometheusPod(g *globalFlags, name string) (http.Handler, bool, error) {
	r, err := lab.ReadRecord(lab.PathsFor(g.runRoot, name))
	if err != nil {
		return nil, false, fmt.Errorf("lab %s: %w", name, err)
	}
	i := slices.IndexFunc(r.Pods, func(p lab.PodRecord) bool { return p.Persona == promserver.Persona && p.IP.IsValid() })
	if i < 0 {
		return nil, false, nil
	}
	return podForward(name, netip.AddrPortFrom(r.Pods[i].IP, 9090).String()), true, nil
}

// podForward is a reverse proxy to target (a pod's IP:port), dialled in the lab's node
// namespace as port-forward does.
func podForward(lab_, target string) http.Handler {
	node := lab.NodeNamespace(lab_)
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(&url.URL{Scheme: "http", Host: target})
			pr.Out.Host = pr.In.Host
		},
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return netns.DialContext(ctx, node, "tcp", target)
		}},
	}
}

func newProxyDashCmd(g *globalFlags, f *dashboardFlags, use string) *cobra.Command {
	var namespace string
	var uiPort int
	cmd := &cobra.Command{
		Use:   use + " [<type>/]<name>[.<namespace>]",
		Short: "Serve a pod's proxy admin (read-only) at http://localhost:15000 until Ctrl-C",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			paths, key, err := g.podPathsIn(args[0], namespace, true)
			if err != nil {
				return err
			}
			sock := paths.AgentSocket(key)
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodGet && r.Method != http.MethodHead {
					http.Error(w, "meshlab's dashboard serves the proxy admin read-only (GET)", http.StatusMethodNotAllowed)
					return
				}
				c := agentapi.NewClient(sock)
				defer c.Close()
				body, err := c.AdminBytes(r.Context(), r.URL.RequestURI())
				if err != nil {
					http.Error(w, err.Error(), http.StatusBadGateway)
					return
				}
				w.Header().Set("Content-Type", http.DetectContentType(body))
				if bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) {
					w.Header().Set("Content-Type", "application/json")
				}
				_, _ = w.Write(body)
			})
			return serveDashboard(cmd, f, uiPort, h)
		},
	}
	cmd.Flags().IntVar(&uiPort, "ui-port", 15000, "the component's port")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace of the pod (default: any)")
	return cmd
}

// serveDashboard listens on the dashboard's address (port -p, else uiPort, else a free
// one, as istioctl), prints the URL as istioctl does and serves h until Ctrl-C.
func serveDashboard(cmd *cobra.Command, f *dashboardFlags, uiPort int, h http.Handler) error {
	return serveDashboardAt(cmd, f, uiPort, "", h)
}

// serveDashboardAt is serveDashboard printing the URL with path, as istioctl prints
// Kiali's (http://localhost:20001/kiali).
func serveDashboardAt(cmd *cobra.Command, f *dashboardFlags, uiPort int, path string, h http.Handler) error {
	host := f.address
	ip := host
	if host == "localhost" {
		ip = "127.0.0.1"
	}
	if a := net.ParseIP(ip); a == nil || !a.IsLoopback() {
		return fmt.Errorf("--address %q: give localhost or a loopback IP (a lab is reached from this host only)", f.address)
	}
	prefs := []int{uiPort, 0}
	if f.port != 0 {
		prefs = []int{f.port}
	}
	var ln net.Listener
	var err error
	for _, p := range prefs {
		if ln, err = net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(p))); err == nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("failure running port forward process: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "http://%s%s\n", net.JoinHostPort(host, strconv.Itoa(port)), path)
	if !f.browser {
		fmt.Fprint(out, "skipping opening a browser")
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
