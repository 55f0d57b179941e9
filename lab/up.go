package lab

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"
)

// Up is `meshlab up`: it starts the lab, prints how to reach it (the dashboard, a
// request through the mesh, status and down as the binary was run), keeps it until ctx
// ends, then stops it and says how long that took.
func Up(ctx context.Context, o Options) error { return up(ctx, o, host) }

// up is Up on the system sys.
func up(ctx context.Context, o Options, sys system) error {
	l, err := start(ctx, o, sys)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted before lab %s was up; what it had created was removed", o.Name)
		}
		return err
	}
	out := l.out
	// Hints name the binary as it was run (./bin/meshlab from make demo) and the lab.
	self := "meshlab"
	if strings.Contains(os.Args[0], "/") {
		self = os.Args[0]
	}
	if o.Name != DefaultName {
		self += " --lab " + o.Name
	}
	if u := l.DashboardURL(); u != "" {
		fmt.Fprintf(out, "\nDashboard (the link logs you in; keep it private):\n  %s\n", u)
	}
	if pod, url, ok := l.ExampleRequest(); ok {
		fmt.Fprintf(out, "\nSend a request through the mesh:\n  sudo %s exec %s -- curl -s %s\n", self, pod, url)
	}
	fmt.Fprintf(out, `See pods and the requests their sidecars counted:
  sudo %[1]s status
Stop the lab: Ctrl-C here, or from another terminal:
  sudo %[1]s down
`, self)
	l.Wait(ctx)
	begin := time.Now()
	fmt.Fprintf(out, "stopping lab %s: its sidecars drain their connections, then everything it created is removed\n", o.Name)
	if err := l.Close(); err != nil {
		return fmt.Errorf("stop lab %s: %w", o.Name, err)
	}
	fmt.Fprintf(out, "lab %s is down (%.1fs)\n", o.Name, time.Since(begin).Seconds())
	return nil
}
