package agent

import (
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestSDSSocketRefusesOtherNetNS: a process in another network namespace (another
// pod's proxy, same uid) is hung up on at once; one in the agent's namespace is served.
func TestSDSSocketRefusesOtherNetNS(t *testing.T) {
	testutil.RequireRoot(t)
	// The system's python starts in tens of milliseconds; a version manager's shim on
	// PATH (pyenv) took 6 s on a loaded machine.
	py, err := exec.LookPath("/usr/bin/python3")
	if err != nil {
		py, err = exec.LookPath("python3")
	}
	if err != nil {
		t.Skip("python3 not installed: it plays the peer process")
	}
	sock := filepath.Join(t.TempDir(), "sds.sock")
	inner, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := onlySameNetNS(inner, testutil.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("served"))
			c.Close()
		}
	}()
	// The peer prints what it reads before the server hangs up.
	peer := `import socket,sys
s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(5)
print(repr(s.recv(16)))`
	run := func(argv ...string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // a bound, not a measure
		defer cancel()
		out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", argv, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := run(py, "-c", peer, sock); got != "b'served'" {
		t.Errorf("peer in the agent's network namespace read %s, want b'served'", got)
	}
	if got := run("unshare", "--net", "--", py, "-c", peer, sock); got != "b''" {
		t.Errorf("peer in another network namespace read %s, want b'' (hung up on)", got)
	}
}
