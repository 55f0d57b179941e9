package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
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
			argv, err := imageCommand(p, container, args[1:])
			if err != nil {
				return err
			}
			if os.Getenv(execInPlaceEnv) == "" {
				return execAndReport()
			}
			env := withoutEnv(os.Environ(), execInPlaceEnv)
			if container == istioProxyContainer || privileged {
				err = netns.ExecPrivileged(p.NetNS, argv, env)
			} else {
				err = netns.Exec(p.NetNS, argv, env)
			}
			// The command did not start: as a container runtime's exec, 126.
			fmt.Fprintln(os.Stderr, "meshlab:", err)
			os.Exit(execNotStarted)
			return nil
		},
	}
	// kubectl's -i and -t (the docs' `exec -it`): the command replaces meshlab, so it
	// always has meshlab's stdin and terminal.
	cmd.Flags().BoolP("stdin", "i", false, "pass stdin to the command, as kubectl's (always so: the command replaces meshlab)")
	cmd.Flags().BoolP("tty", "t", false, "stdin is a terminal, as kubectl's (always meshlab's own terminal)")
	cmd.Flags().BoolVar(&privileged, "privileged", false, "run as root with every capability in the pod's network namespace only, not as the pod's app (iptables-save, tcpdump)")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace of POD or TYPE/NAME (default: any)")
	cmd.Flags().StringVarP(&container, "container", "c", "", "container: istio-proxy runs the command in the pod's network namespace beside the sidecar (pilot-agent request GET stats); any other name is the pod's app container")
	return cmd
}

// execInPlaceEnv, set, makes `meshlab exec` become the command (execve) once it has
// found the pod. Unset, meshlab runs itself so, waits, and ends as kubectl exec ends:
// with the command's exit code and, when that is not 0, kubectl's line "command
// terminated with exit code N" on stderr (the docs print it: mtls-migration's curl 56).
const execInPlaceEnv = "MESHLAB_EXEC_IN_PLACE"

// execNotStarted is the exit code of a command that could not be started (not found),
// as a container runtime's exec reports it.
const execNotStarted = 126

// execAndReport runs this `meshlab exec` command line again as a child that becomes the
// command, passes it the signals meshlab gets, and exits as kubectl exec does. The child
// dies with meshlab (Pdeathsig, from a thread held until it exits).
func execAndReport() error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("exec: find own binary: %w", err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	child := exec.Command(self, os.Args[1:]...)
	child.Env = append(os.Environ(), execInPlaceEnv+"=1")
	child.Stdin, child.Stdout, child.Stderr = os.Stdin, os.Stdout, os.Stderr
	child.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(signals)
	if err := child.Start(); err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case s := <-signals:
				_ = child.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err = child.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return err
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		os.Exit(128 + int(ws.Signal()))
	}
	fmt.Fprintf(os.Stderr, "command terminated with exit code %d\n", ee.ExitCode())
	os.Exit(ee.ExitCode())
	return nil
}

// withoutEnv returns env without the variable name.
func withoutEnv(env []string, name string) []string {
	out := make([]string, 0, len(env))
	for _, e := range env {
		if !strings.HasPrefix(e, name+"=") {
			out = append(out, e)
		}
	}
	return out
}

// istioProxyContainer is the sidecar's container name in an Istio pod.
const istioProxyContainer = "istio-proxy"

// imageCommand returns argv as it runs in the container: the commands an image has that
// the host does not (fortio in a fortio/fortio pod, pilot-agent in istio-proxy) are the
// meshlab binary's own (`meshlab fortio`, `meshlab pilot-agent`); others run as given.
func imageCommand(p lab.PodRecord, container string, argv []string) ([]string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("exec: find own binary: %w", err)
	}
	name := argv[0]
	if container == istioProxyContainer {
		if !p.Sidecar {
			return nil, fmt.Errorf("pod %s has no container %s: it runs without a sidecar", p.Name, istioProxyContainer)
		}
		if name == "sudo" && len(argv) > 1 {
			// The proxy image's sudo (mtls-migration's `sudo tcpdump`): the command
			// already runs as root with every capability in the pod's network namespace.
			argv, name = argv[1:], argv[1]
		}
		if name == "pilot-agent" || name == "/usr/local/bin/pilot-agent" {
			return append([]string{self, "pilot-agent"}, argv[1:]...), nil
		}
		if name == "tcpdump" {
			if _, err := exec.LookPath(name); err != nil {
				return nil, fmt.Errorf("tcpdump is not installed on this machine (the proxy image's tcpdump is the host's): `sudo make deps` installs Debian's tcpdump")
			}
		}
		return argv, nil
	}
	if p.Persona == demoapp.PersonaFortio && (name == "fortio" || name == "/usr/bin/fortio") {
		return append([]string{self, "fortio"}, argv[1:]...), nil
	}
	if p.Persona == demoapp.PersonaSleep {
		return busyboxCommand(self, argv), nil
	}
	return argv, nil
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
