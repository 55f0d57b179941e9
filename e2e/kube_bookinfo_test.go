package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/api"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/lab"
)

// TestBookinfoTasks runs Bookinfo from Deployments naming the sample's images, then Istio's
// request-routing and fault-injection tasks as a learner does: every reviews version shows
// its stars; with the tasks' objects jason gets reviews v2 and everyone else v1; and the 7 s
// delay on ratings for jason makes productpage give up on reviews after its 2 x 3 s (the
// bug the fault-injection task finds), where reviews v2 alone would have waited 10 s.
func TestBookinfoTasks(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	l := startLab(t, "testdata/kube-bookinfo.yaml")
	c := api.NewUnixClient(lab.PathsFor(lab.DefaultRunRoot, l.name).APISocket())
	defer c.Close()
	pods, err := c.Pods(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var curl string
	for _, p := range pods {
		if strings.HasPrefix(p.Name, "curl-") {
			curl = p.Name
		}
	}
	if curl == "" {
		t.Fatalf("no curl pod among %+v", pods)
	}
	page := func(user string) string {
		t.Helper()
		args := []string{"exec", "--name", l.name, curl, "--", "curl", "-sS", "--max-time", "15"}
		if user != "" {
			args = append(args, "-H", "end-user: "+user)
		}
		out, err := meshlab(t, append(args, "http://productpage:9080/productpage")...)
		if err != nil {
			t.Fatalf("GET /productpage: %v\n%s", err, out)
		}
		if !strings.Contains(out, "<title>Simple Bookstore App</title>") {
			t.Fatalf("GET /productpage is not the product page:\n%s", out)
		}
		return out
	}
	stars := func(p string) string {
		switch {
		case strings.Contains(p, `color="black"`):
			return "black"
		case strings.Contains(p, `color="red"`):
			return "red"
		}
		return "none"
	}

	// Without routing, reviews is balanced over its three versions (LEAST_REQUEST, random
	// among equals): keep asking until each has shown, within 60 pages (a version missing
	// from 60 has probability (2/3)^60, about 3e-11).
	seen := map[string]int{}
	for n := 0; n < 60 && (seen["none"] == 0 || seen["black"] == 0 || seen["red"] == 0); n++ {
		seen[stars(page(""))]++
	}
	if seen["none"] == 0 || seen["black"] == 0 || seen["red"] == 0 {
		t.Errorf("pages without routing showed stars %v; want all three reviews versions", seen)
	}

	if out, err := meshlab(t, "apply", "--wait", "--name", l.name, "-f", "testdata/bookinfo-routing.yaml"); err != nil {
		t.Fatalf("apply the tasks' objects: %v\n%s", err, out)
	}
	// apply returns once the config is accepted; the proxies converge right after.
	deadline := time.Now().Add(20 * time.Second)
	for inARow := 0; inARow < 4; {
		if s := stars(page("")); s == "none" {
			inARow++
		} else if inARow = 0; time.Now().After(deadline) {
			t.Fatalf("20s after the reviews VirtualService, an anonymous user still got %s stars; want reviews v1 (none)", s)
		}
	}
	// The ratings delay reaches reviews v2's proxy with the same push; allow it a retry.
	var p string
	var took time.Duration
	for attempt := 0; attempt < 3; attempt++ {
		start := time.Now()
		p = page("jason")
		took = time.Since(start)
		if strings.Contains(p, "Sorry, product reviews are currently unavailable for this book.") {
			break
		}
	}
	if !strings.Contains(p, "Sorry, product reviews are currently unavailable for this book.") {
		t.Errorf("jason with a 7 s ratings delay: want productpage's reviews error, got:\n%s", p)
	}
	if took < 5500*time.Millisecond || took > 9*time.Second {
		t.Errorf("jason's page took %v; want about productpage's 2 x 3 s", took)
	}
}
