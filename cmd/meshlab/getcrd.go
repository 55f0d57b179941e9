package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/meshlab/meshlab/api"
)

// crdNames are the CustomResourceDefinitions a cluster with Istio and the Gateway API
// holds (Istio's base chart and the Gateway API's standard install), which Istio's docs
// check for (`kubectl get crd gateways.gateway.networking.k8s.io`). A lab has them all:
// its kinds are built in.
var crdNames = []string{
	"authorizationpolicies.security.istio.io",
	"destinationrules.networking.istio.io",
	"envoyfilters.networking.istio.io",
	"gatewayclasses.gateway.networking.k8s.io",
	"gateways.gateway.networking.k8s.io",
	"gateways.networking.istio.io",
	"grpcroutes.gateway.networking.k8s.io",
	"httproutes.gateway.networking.k8s.io",
	"peerauthentications.security.istio.io",
	"proxyconfigs.networking.istio.io",
	"referencegrants.gateway.networking.k8s.io",
	"requestauthentications.security.istio.io",
	"serviceentries.networking.istio.io",
	"sidecars.networking.istio.io",
	"tcproutes.gateway.networking.k8s.io",
	"telemetries.telemetry.istio.io",
	"tlsroutes.gateway.networking.k8s.io",
	"trafficextensions.extensions.istio.io",
	"virtualservices.networking.istio.io",
	"wasmplugins.extensions.istio.io",
	"workloadentries.networking.istio.io",
	"workloadgroups.networking.istio.io",
}

// isCRDKind reports whether kind is kubectl's spelling of CustomResourceDefinitions.
func isCRDKind(kind string) bool {
	switch strings.ToLower(kind) {
	case "crd", "crds", "customresourcedefinition", "customresourcedefinitions", "customresourcedefinitions.apiextensions.k8s.io":
		return true
	}
	return false
}

// getCRDs prints the lab's CRDs as kubectl get crd: NAME and CREATED AT (the lab's
// start); a name it does not have is kubectl's NotFound.
func getCRDs(ctx context.Context, c *api.Client, name string, labelCols labelColumns, out io.Writer) error {
	names := crdNames
	if name != "" {
		if !slices.Contains(crdNames, name) {
			return fmt.Errorf("Error from server (NotFound): customresourcedefinitions.apiextensions.k8s.io %q not found", name) //nolint:staticcheck // kubectl's text
		}
		names = []string{name}
	}
	created := time.Now()
	if info, err := c.Lab(ctx); err == nil && !info.Created.IsZero() {
		created = info.Created
	}
	tw := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, strings.Join(append([]string{"NAME", "CREATED AT"}, labelCols.heads()...), "\t"))
	for _, n := range names {
		row := append([]string{n, created.UTC().Format(time.RFC3339)}, labelCols.cells(nil)...) // the lab's CRDs carry no labels
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}
