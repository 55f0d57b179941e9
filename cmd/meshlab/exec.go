package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/meshlab/meshlab/demoapp"
	"github.com/meshlab/meshlab/lab"
	"github.com/meshlab/meshlab/netns"
)

func newExecCmd(g *globalFlags) *cobra.Command {
	var privileged bool
	var namespace, container string
	cmd := &cobra.Command{
		Use:   "exec POD|TYPE/NAME -- COMMAND [ARGS...]",
		Short: "Run a command in a pod as its app runs: its namespaces, uid and restrictions (like kubectl exec)",
		Example: `  sudo meshlab exec frontend-v1 -- curl -s http://backend:8080/
  sudo meshlab exec deploy/curl -- curl -s http://httpbin:8000/headers
  sudo meshlab exec -n foo deploy/curl -- curl -s http://httpbin.foo:8000/ip
  sudo meshlab exec deploy/fortio -- fortio load -c 2 -qps 0 -n 20 http://httpbin:8000/get
  sudo meshlab exec deploy/fortio -c istio-proxy -- pilot-agent request GET stats
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
			p, err := r.FindPod(args[0], namespace)
			if err != nil {
				return err
			}
			argv, asProxy, err := imageCommand(p, container, args[1:])
			if err != nil {
				return err
			}
			as := runAs{privileged: container == istioProxyContainer || privileged, proxyUser: asProxy && !privileged}
			if as.proxyUser && len(p.ProxyMounts) > 0 {
				// The container's volumes at their paths (netns.ProxyView): meshlab starts
				// as root, mounts them and becomes the proxy's user for the command.
				self, err := os.Executable()
				if err != nil {
					return fmt.Errorf("exec: find own binary: %w", err)
				}
				e, err := netns.ProxyExecEnv(netns.ProxyView{UID: lab.ProxyUID, GID: lab.ProxyUID, Mounts: p.ProxyMounts,
					Scratch: lab.ProxyScratch(lab.PathsFor(g.runRoot, name).PodDir(p.Key))})
				if err != nil {
					return err
				}
				argv, as.proxyUser, as.env = append([]string{self}, argv...), false, []string{e}
			}
			return runAndReport(p.NetNS, argv, as)
		},
	}
	// kubectl's -i and -t (the docs' `exec -it`): the command runs with meshlab's stdin
	// and terminal, always.
	cmd.Flags().BoolP("stdin", "i", false, "pass stdin to the command, as kubectl's (always so: the command has meshlab's stdin)")
	cmd.Flags().BoolP("tty", "t", false, "stdin is a terminal, as kubectl's (always meshlab's own terminal)")
	cmd.Flags().BoolVar(&privileged, "privileged", false, "run as root with every capability in the pod's network namespace only, not as the pod's app (iptables-save, tcpdump)")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace of POD or TYPE/NAME (default: any)")
	cmd.Flags().StringVarP(&container, "container", "c", "", "container: istio-proxy runs the command in the pod's network namespace beside the sidecar (pilot-agent request GET stats); any other name is the pod's app container")
	return cmd
}

// execNotStarted is the exit code of a command that could not be started (not found),
// as a container runtime's exec reports it.
const execNotStarted = 126

// runAs is who a command of meshlab exec runs as.
type runAs struct {
	// privileged runs it in the pod's network namespace only, as root (else in the
	// pod's namespaces as its app).
	privileged bool
	// proxyUser, with privileged, runs it as the sidecar's user (uid and gid 1337, no
	// capabilities), as a command in Istio's istio-proxy container runs: the pod's
	// outbound capture lets its connections through as it does the proxy's own.
	proxyUser bool
	// env is added to meshlab's environment for the command.
	env []string
}

// runAndReport runs argv in the pod of network namespace ns (netns.Run: as its app, or
// with privileged as root, or the proxy's user, in the network namespace only) as meshlab's child, passes it
// the signals meshlab gets, and exits as kubectl exec does: with the command's exit
// code and, when that is not 0, kubectl's line "command terminated with exit code N" on
// stderr (the docs print it: mtls-migration's curl 56); 126 for a command that did not
// start. The child dies with meshlab (Pdeathsig, from a thread netns.Run holds until it
// exits).
func runAndReport(ns string, argv []string, as runAs) error {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(signals)
	done := make(chan struct{})
	defer close(done)
	prepare := func(c *exec.Cmd) {
		c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if as.proxyUser {
			c.SysProcAttr.Credential = &syscall.Credential{Uid: lab.ProxyUID, Gid: lab.ProxyUID}
		}
	}
	started := func(p *os.Process) {
		go func() {
			for {
				select {
				case s := <-signals:
					_ = p.Signal(s)
				case <-done:
					return
				}
			}
		}()
	}
	err := netns.Run(ns, argv, append(os.Environ(), as.env...), as.privileged, prepare, started)
	code := 0
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			os.Exit(128 + int(ws.Signal()))
		}
		code = ee.ExitCode()
	default:
		// The command did not start: as a container runtime's exec, 126.
		fmt.Fprintln(os.Stderr, "meshlab:", err)
		code = execNotStarted
	}
	fmt.Fprintf(os.Stderr, "command terminated with exit code %d\n", code)
	os.Exit(code)
	return nil
}

// istioProxyContainer is the sidecar's container name in an Istio pod.
const istioProxyContainer = "istio-proxy"

// imageCommand returns argv as it runs in the container: the commands an image has that
// the host does not (fortio in a fortio/fortio pod, pilot-agent in istio-proxy) are the
// meshlab binary's own (`meshlab fortio`, `meshlab pilot-agent`); others run as given.
// asProxy reports whether it runs as the istio-proxy container's user (1337): any
// command there but sudo's (root, as the image's sudo makes it) and pilot-agent's
// (meshlab's own, which reads the lab's root-owned run directory).
func imageCommand(p lab.PodRecord, container string, argv []string) (_ []string, asProxy bool, _ error) {
	self, err := os.Executable()
	if err != nil {
		return nil, false, fmt.Errorf("exec: find own binary: %w", err)
	}
	name := argv[0]
	if container == istioProxyContainer {
		if !p.Sidecar {
			return nil, false, fmt.Errorf("pod %s has no container %s: it runs without a sidecar", p.Name, istioProxyContainer)
		}
		asProxy = true
		if name == "sudo" && len(argv) > 1 {
			// The proxy image's sudo (mtls-migration's `sudo tcpdump`): the command
			// runs as root with every capability in the pod's network namespace.
			argv, name, asProxy = argv[1:], argv[1], false
		}
		if name == "pilot-agent" || name == "/usr/local/bin/pilot-agent" {
			return append([]string{self, "pilot-agent"}, argv[1:]...), false, nil
		}
		if name == "tcpdump" {
			if _, err := exec.LookPath(name); err != nil {
				return nil, false, fmt.Errorf("tcpdump is not installed on this machine (the proxy image's tcpdump is the host's): `sudo make deps` installs Debian's tcpdump")
			}
		}
		return argv, asProxy, nil
	}
	if p.Persona == demoapp.PersonaFortio && (name == "fortio" || name == "/usr/bin/fortio") {
		return append([]string{self, "fortio"}, argv[1:]...), false, nil
	}
	if p.Persona == demoapp.PersonaSleep {
		return busyboxCommand(self, argv), false, nil
	}
	return argv, false, nil
}

// busyboxCommand returns argv as the curl image's busybox runs it: its nc is meshlab's
// (`meshlab nc`), run directly (`nc HOST PORT`) or from a shell script (`sh -c "(date;
// sleep 1) | nc $INGRESS_HOST $TCP_INGRESS_PORT"`, where a shell function named nc,
// defined before the script, wins over the host's PATH, which may have no nc).
func busyboxCommand(self string, argv []string) []string {
	switch {
	case argv[0] == "nc" || argv[0] == "/usr/bin/nc":
		return append([]string{self, "nc"}, argv[1:]...)
	case (argv[0] == "sh" || argv[0] == "/bin/sh") && len(argv) >= 3 && argv[1] == "-c" && strings.Contains(argv[2], "nc"):
		script := "nc() { '" + strings.ReplaceAll(self, "'", `'\''`) + "' nc \"$@\"; }\n" + argv[2]
		return append([]string{argv[0], "-c", script}, argv[3:]...)
	}
	return argv
}
