package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/lab"
	"github.com/meshlab/meshlab/scenarios"
	"github.com/meshlab/meshlab/scenarios/bugreport"
)

type upFlags struct {
	podCIDR, serviceCIDR string
	proxyPath            string
	drain                time.Duration
	timeout              time.Duration
	dryRun               bool
	listen               string
	caCert, caKey        string
	certTTL              time.Duration
	xdsHistory           int
	xdsListen            string
	controlPlane         string
	istiodPath           string
	fromBugReport        string
}

func newUpCmd(g *globalFlags) *cobra.Command {
	f := &upFlags{}
	cmd := &cobra.Command{
		Use:   "up [scenario]",
		Short: "Bring a lab up from a scenario file or a built-in scenario (default: hello)",
		Example: `  sudo meshlab up                      # the built-in hello lab
  sudo meshlab up scenarios/hello.yaml --lab second --pod-cidr 10.245.0.0/16
  sudo meshlab up --from-bug-report bug-report.tar.gz --control-plane=istiod`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completeNamesOrFiles(bundledScenarios),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref := "hello"
			if len(args) == 1 {
				ref = args[0]
			}
			var report *bugreport.Report
			var file string
			var data []byte
			var err error
			if f.fromBugReport != "" {
				if len(args) == 1 {
					return fmt.Errorf("--from-bug-report %s: give no scenario beside it (got %s)", f.fromBugReport, args[0])
				}
				if report, err = bugReportScenario(cmd, f); err != nil {
					return err
				}
				file, data = report.Source, report.Scenario
			} else if file, data, err = readScenario(ref); err != nil {
				return err
			}
			name := g.name
			if name == "" {
				name = lab.DefaultName
			}
			opts := lab.Options{
				Name: name, ScenarioFile: file, ScenarioData: data, RunRoot: g.runRoot,
				ProxyPath: f.proxyPath, TerminationDrain: f.drain, ReadyTimeout: f.timeout,
				Out: cmd.OutOrStdout(), Logger: g.logger(),
				Listen: f.listen, ListenFallback: !cmd.Flags().Changed("listen"),
				CACertFile: f.caCert, CAKeyFile: f.caKey, CertTTL: f.certTTL, XDSHistory: f.xdsHistory,
				XDSListen: f.xdsListen, ControlPlane: f.controlPlane, IstiodPath: f.istiodPath,
			}
			if report != nil && len(report.Dumps) > 0 {
				opts.Prepare = func(runDir string) error {
					kept, err := report.KeepDumps(runDir)
					if err == nil {
						fmt.Fprintf(cmd.OutOrStdout(), "bug-report: the config dumps of %d proxies are kept beside the lab: meshlab diff POD --against=cluster\n", len(kept))
					}
					return err
				}
			}
			if f.listen != "" {
				if _, err := lab.ParseListen(f.listen); err != nil {
					return err
				}
			}
			if opts.PodCIDR, err = parsePrefix("--pod-cidr", f.podCIDR); err != nil {
				return err
			}
			if opts.ServiceCIDR, err = parsePrefix("--service-cidr", f.serviceCIDR); err != nil {
				return err
			}
			if f.dryRun {
				if err := lab.Validate(opts); err != nil {
					return locate(report, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s is valid\n", file)
				return nil
			}
			if err := requireRoot("meshlab up"); err != nil {
				return err
			}
			ctx, stop := outliveOutput(cmd.Context())
			defer stop()
			return locate(report, lab.Up(ctx, opts))
		},
	}
	cmd.Flags().StringVar(&f.podCIDR, "pod-cidr", lab.DefaultPodCIDR.String(), "address range of pods")
	cmd.Flags().StringVar(&f.serviceCIDR, "service-cidr", lab.DefaultServiceCIDR.String(), "address range of service VIPs")
	cmd.Flags().StringVar(&f.proxyPath, "envoy-path", "", "Envoy binary for every sidecar (default: envoy on PATH, else the built-in meshlab proxy)")
	cmd.Flags().DurationVar(&f.drain, "drain-duration", 5*time.Second, "how long sidecars drain connections when the lab stops (Istio's terminationDrainDuration)")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 0, fmt.Sprintf("how long to wait for every pod to become ready (default: %s, or %s per pod when that is longer)", lab.DefaultReadyTimeout, lab.ReadyTimeoutPerPod))
	cmd.Flags().StringVar(&f.caCert, "ca-cert", "", "PEM root certificate of the lab's CA (with --ca-key; default: a new root per lab)")
	cmd.Flags().StringVar(&f.caKey, "ca-key", "", "PEM private key (ECDSA) of --ca-cert")
	cmd.Flags().DurationVar(&f.certTTL, "cert-ttl", 24*time.Hour, "lifetime of workload certificates (at least 1s; rotated at ~80%)")
	cmd.Flags().IntVar(&f.xdsHistory, "xds-history", lab.DefaultXDSHistory, "config versions the control plane keeps per proxy for meshlab history and meshlab diff")
	cmd.Flags().StringVar(&f.xdsListen, "xds-listen", "", "also serve xDS and the CA on this loopback TCP address (e.g. 127.0.0.1:15010), to callers that send a pod's token as \"authorization: Bearer <token>\"; default: the lab's unix socket only")
	cmd.Flags().StringVar(&f.controlPlane, "control-plane", "", "what generates the proxies' config: meshlab (its own generator) or istiod (Istio's istiod, the meshlab-istiod binary that `make istiod` builds); default: the scenario's LabSettings spec.controlPlane, else meshlab")
	cmd.Flags().StringVar(&f.istiodPath, "istiod-path", "", "the meshlab-istiod binary for --control-plane=istiod (default: beside meshlab, else on PATH)")
	cmd.Flags().StringVar(&f.fromBugReport, "from-bug-report", "", "make the lab of what `istioctl bug-report` wrote (its bug-report.tar.gz, or the directory it extracts to): the cluster's objects, its mesh config, its Services' addresses where --service-cidr allows")
	cmd.Flags().BoolVar(&f.dryRun, "dry-run", false, "validate the scenario and exit, creating nothing")
	cmd.Flags().StringVar(&f.listen, "listen", lab.DefaultListen, "address of the dashboard and the API on TCP (a specific IP; \"\" for none; another port is chosen when the default is taken)")
	return cmd
}

// outliveOutput keeps a running lab from dying midway with its output. Go ends a process
// whose write to a closed pipe on stdout or stderr raises SIGPIPE: a lab whose reader went
// away (`up | tee` stopped, a test runner killed) died at its next log line and left its
// namespaces and processes for `clean`. With SIGPIPE notified the write fails instead and
// the lab runs on until told to go down. A terminal that closes (SIGHUP) takes it down as
// Ctrl-C does, unless the lab was started with SIGHUP ignored (nohup), which then stays so.
// The children the lab starts get both signals' default actions back at exec.
func outliveOutput(ctx context.Context) (context.Context, context.CancelFunc) {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	if signal.Ignored(syscall.SIGHUP) {
		return context.WithCancel(ctx)
	}
	return signal.NotifyContext(ctx, syscall.SIGHUP)
}

// bugReportScenario reads the bug report --from-bug-report names and says, one line
// each, what it read, ignored and chose. Without --service-cidr the lab takes the /16
// holding the report's Service addresses, so that they are kept.
func bugReportScenario(cmd *cobra.Command, f *upFlags) (*bugreport.Report, error) {
	r, err := bugreport.Read(f.fromBugReport)
	if err != nil {
		return nil, err
	}
	out := cmd.OutOrStdout()
	for _, n := range r.Notes {
		fmt.Fprintln(out, n)
	}
	if r.IstioVersion != "" {
		fmt.Fprintf(out, "bug-report: the cluster ran Istio %s (%s)\n", r.IstioVersion, r.VersionFrom)
	}
	if len(r.Proxies) > 0 {
		fmt.Fprintf(out, "bug-report: it holds the admin output of %d proxies (%s)\n", len(r.Proxies), strings.Join(r.Proxies, ", "))
	}
	if !cmd.Flags().Changed("service-cidr") && r.ServiceCIDR.IsValid() && r.ServiceCIDR.String() != f.serviceCIDR {
		f.serviceCIDR = r.ServiceCIDR.String()
		fmt.Fprintf(out, "bug-report: --service-cidr %s, the range of the cluster's Service addresses\n", f.serviceCIDR)
	}
	return r, nil
}

// locate names the bug report's files in the loader's errors on it.
func locate(r *bugreport.Report, err error) error {
	if r == nil || err == nil {
		return err
	}
	return r.Locate(err)
}

// readScenario reads ref as a file when one exists, else as a built-in scenario name.
func readScenario(ref string) (string, []byte, error) {
	if _, err := os.Stat(ref); err == nil {
		data, err := api.ReadFileLimited(ref)
		if err != nil {
			return "", nil, fmt.Errorf("read scenario: %w", err)
		}
		return ref, data, nil
	} else if !os.IsNotExist(err) {
		return "", nil, fmt.Errorf("read scenario: %w", err)
	}
	data, file, err := scenarios.Lookup(ref)
	if err != nil {
		return "", nil, fmt.Errorf("scenario %q is neither a file nor a built-in scenario (%v): %w", ref, scenarios.Names(), err)
	}
	return file, data, nil
}

func parsePrefix(flag, s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return p, fmt.Errorf("%s: %w", flag, err)
	}
	if !p.Addr().Is4() {
		return p, fmt.Errorf("%s: %s is not an IPv4 range (meshlab labs are IPv4 for now)", flag, s)
	}
	if p.Bits() > 28 {
		return p, fmt.Errorf("%s: %s is too small: use a /28 or larger", flag, s)
	}
	return p.Masked(), nil
}
