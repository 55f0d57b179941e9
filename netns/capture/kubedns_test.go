package capture

import (
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

func TestKubeDNSRulesGolden(t *testing.T) {
	t.Parallel()
	got := KubeDNSRules(53)
	testutil.Golden(t, "kubedns", []byte(got))
	if strings.Count(got, "-j REDIRECT --to-ports 53") != 2 {
		t.Errorf("want UDP and TCP 53 redirected:\n%s", got)
	}
}
