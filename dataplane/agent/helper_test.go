package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

// Environment of the fake proxy (the helper process).
const (
	helperEnv       = "MESHLAB_AGENT_TEST_HELPER" // "1": behave as the proxy
	helperEventsEnv = "MESHLAB_AGENT_TEST_EVENTS" // file the fake appends its events to
	helperModeEnv   = "MESHLAB_AGENT_TEST_MODE"   // "crash-first": the first start crashes
	fakeVersion     = "fake-envoy version: 1.2.3/test"
)

// TestHelperProcess is the fake proxy, run by helperLauncher as a re-executed test
// binary: it answers --version, reads its bootstrap like envoy, serves a tiny admin API
// (/ready, /server_info, /stats, POST /drain_listeners) on the bootstrap's admin address,
// and records what happens to it in the events file.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("helper process for the agent tests")
	}
	os.Exit(fakeProxyMain(helperArgs()))
}

func helperArgs() []string {
	for i, a := range os.Args {
		if a == "--" {
			return os.Args[i+1:]
		}
	}
	return nil
}

func fakeProxyMain(args []string) int {
	if len(args) == 1 && args[0] == "--version" {
		fmt.Println(fakeVersion)
		fmt.Println("second line is ignored")
		return 0
	}
	events := func(format string, a ...any) {
		f, err := os.OpenFile(os.Getenv(helperEventsEnv), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, "open events:", err)
			return
		}
		defer f.Close()
		fmt.Fprintf(f, format+"\n", a...)
	}
	prior, _ := os.ReadFile(os.Getenv(helperEventsEnv))
	argv, _ := json.Marshal(args)
	events("start uid=%d gid=%d pgid-is-pid=%t argv=%s", os.Getuid(), os.Getgid(), syscall.Getpgrp() == os.Getpid(), argv)
	if os.Getenv(helperModeEnv) == "crash-first" && !strings.Contains(string(prior), "start ") {
		for i := range 25 {
			fmt.Fprintf(os.Stderr, "fake crash line %d\n", i)
		}
		return 3
	}
	var bootstrapPath string
	epoch := 0
	for i, a := range args {
		if a == "-c" && i+1 < len(args) {
			bootstrapPath = args[i+1]
		}
		if a == "--restart-epoch" && i+1 < len(args) {
			epoch, _ = strconv.Atoi(args[i+1])
		}
	}
	data, err := os.ReadFile(bootstrapPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "read bootstrap:", err)
		return 1
	}
	var b bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(data, &b); err != nil {
		fmt.Fprintln(os.Stderr, "parse bootstrap:", err)
		return 1
	}
	sa := b.GetAdmin().GetAddress().GetSocketAddress()
	adminAddr := net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue())))
	if epoch > 0 {
		// As Envoy's shutdown_admin: the parent hands over the admin port.
		resp, err := http.Post("http://"+adminAddr+"/fake/shutdown_admin", "", nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, "hot restart: parent not reachable:", err)
			return 1
		}
		resp.Body.Close()
	}
	var ln net.Listener
	for range 100 {
		if ln, err = net.Listen("tcp", adminAddr); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen admin:", err)
		return 1
	}
	var mu sync.Mutex
	state := "LIVE"
	parentExit := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if state != "LIVE" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprintln(w, state)
	})
	mux.HandleFunc("GET /server_info", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, `{"version": "fake", "state": %q, "command_line_options": {"restart_epoch": %d}}`, state, epoch)
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "filter: %s\ncluster_manager.cds.update_success: 1\nlistener_manager.lds.update_success: 2\n", r.URL.Query().Get("filter"))
	})
	mux.HandleFunc("POST /drain_listeners", func(w http.ResponseWriter, r *http.Request) {
		events("drain_listeners %s", r.URL.RawQuery)
		mu.Lock()
		state = "DRAINING"
		mu.Unlock()
		fmt.Fprintln(w, "OK")
	})
	srv := &http.Server{Handler: mux}
	mux.HandleFunc("POST /fake/shutdown_admin", func(w http.ResponseWriter, _ *http.Request) {
		events("epoch %d: shutdown_admin", epoch)
		mu.Lock()
		state = "DRAINING"
		mu.Unlock()
		go func() {
			time.Sleep(10 * time.Millisecond) // let the answer out
			_ = srv.Close()                   // frees the port for the child
			time.Sleep(200 * time.Millisecond)
			close(parentExit) // the child terminates its parent
		}()
	})
	go srv.Serve(ln) //nolint:errcheck // the process exits on SIGTERM
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	select {
	case s := <-sig:
		events("epoch %d: signal %s", epoch, s)
	case <-parentExit:
		events("epoch %d: exit after hot restart", epoch)
	}
	_ = srv.Shutdown(context.Background())
	return 0
}

// launchedCmd is what the agent asked to run, before helperLauncher rewrote it.
type launchedCmd struct {
	Path string
	Args []string
	Dir  string
	Attr *syscall.SysProcAttr
}

// helperLauncher runs the fake proxy in place of the real binary, keeping the agent's
// credentials and process attributes, and records each command.
type helperLauncher struct {
	env []string

	mu   sync.Mutex
	cmds []launchedCmd
}

var _ launcher = (*helperLauncher)(nil)

func (h *helperLauncher) Start(cmd *exec.Cmd) error {
	h.mu.Lock()
	h.cmds = append(h.cmds, launchedCmd{Path: cmd.Path, Args: append([]string{}, cmd.Args...), Dir: cmd.Dir, Attr: cmd.SysProcAttr})
	h.mu.Unlock()
	if strings.HasPrefix(cmd.Path, "/nonexistent/") || filepath.Base(cmd.Path) == "not-executable" {
		return cmd.Start() // the real failure of a missing or non-executable binary
	}
	cmd.Args = append([]string{helperBinary, "-test.run=^TestHelperProcess$", "--"}, cmd.Args[1:]...)
	cmd.Path = helperBinary
	cmd.Env = append(os.Environ(), append([]string{helperEnv + "=1"}, h.env...)...)
	return cmd.Start()
}

func (h *helperLauncher) launched() []launchedCmd {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]launchedCmd{}, h.cmds...)
}
