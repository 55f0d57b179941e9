package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// install reads istioctl's profiles and Getting Started's IstioOperator file, and refuses
// by name what a lab does not read.
func TestInstallComponents(t *testing.T) {
	t.Parallel()
	noGateways := filepath.Join(testutil.IstioSamples(t), "bookinfo", "demo-profile-no-gateways.yaml")
	for _, tc := range []struct {
		sets, files []string
		want        []string
		err         string
	}{
		{files: []string{noGateways}, want: []string{"core", "istiod"}},
		{sets: []string{"profile=demo"}, want: []string{"core", "istiod", "egress", "ingress"}},
		{want: []string{"core", "istiod", "ingress"}},
		{sets: []string{"profile=ambient"}, want: []string{"core", "istiod", "cni", "ztunnel"}},
		{sets: []string{"profile=minimal"}, want: []string{"core", "istiod"}},
		{sets: []string{"profile=openshift"}, err: `profile "openshift" is not one a lab stands for`},
		{sets: []string{"meshConfig.accessLogFile=/dev/stdout"}, err: "--set meshConfig.accessLogFile=/dev/stdout: meshlab's install reads only profile=NAME"},
	} {
		got, _, err := installComponents(tc.sets, tc.files)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v %v: %v, want %q", tc.sets, tc.files, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%v %v: %v %v, want %v", tc.sets, tc.files, got, err, tc.want)
		}
	}
}
