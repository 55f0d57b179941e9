package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// installProfiles are istioctl's profiles a lab stands for, each with the components
// istioctl reports installing, in its order.
var installProfiles = map[string][]string{
	"default": {"core", "istiod", "ingress"},
	"demo":    {"core", "istiod", "egress", "ingress"},
	"minimal": {"core", "istiod"},
	"ambient": {"core", "istiod", "cni", "ztunnel"},
}

// installLines are istioctl's line for each component it installed.
var installLines = map[string]string{
	"core":    "✔ Istio core installed ⛵️",
	"istiod":  "✔ Istiod installed 🧠",
	"cni":     "✔ CNI installed 🪢",
	"ztunnel": "✔ Ztunnel installed 🔒",
	"egress":  "✔ Egress gateways installed 🛫",
	"ingress": "✔ Ingress gateways installed 🛬",
}

// istioOperator is the part of an IstioOperator file install reads: the profile and the
// gateways turned on or off (Getting Started's demo-profile-no-gateways.yaml).
type istioOperator struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name,omitempty"`
		Namespace string `json:"namespace,omitempty"`
	} `json:"metadata"`
	Spec struct {
		Profile    string `json:"profile,omitempty"`
		Components struct {
			IngressGateways []iopGateway `json:"ingressGateways,omitempty"`
			EgressGateways  []iopGateway `json:"egressGateways,omitempty"`
		} `json:"components"`
	} `json:"spec"`
}

type iopGateway struct {
	Name    string `json:"name"`
	Enabled *bool  `json:"enabled,omitempty"`
}

// newInstallCmd is istioctl install as Istio's task pages run it. A lab has its control
// plane from the start: meshlab's own istiod, the node agent and ztunnel for ambient pods,
// and the ingress and egress gateways that a Gateway selecting them brings. So install
// checks what it is given (a profile the lab stands for, an IstioOperator it reads,
// refusing by name what it does not) and prints istioctl's lines for the profile's
// components; it changes nothing in the lab.
func newInstallCmd(g *globalFlags) *cobra.Command {
	var sets, files []string
	var yes bool
	cmd := &cobra.Command{
		Use:   "install [--set profile=demo|default|minimal|ambient] [-f ISTIO_OPERATOR.yaml] [-y]",
		Short: "Install Istio into the lab, as istioctl install (a lab has its control plane already: this checks the profile and says what it has)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			components, profile, err := installComponents(sets, files)
			if err != nil {
				return err
			}
			c, err := g.apiClient()
			if err != nil {
				return err
			}
			c.Close()
			out := cmd.OutOrStdout()
			if !yes {
				fmt.Fprintf(out, "This will install the Istio profile %q into the cluster. Proceed? (y/N) ", profile)
				if !confirmed(cmd.InOrStdin()) {
					return fmt.Errorf("cancelled")
				}
			}
			for _, comp := range components {
				fmt.Fprintln(out, installLines[comp])
			}
			fmt.Fprintln(out, "✔ Installation complete")
			if profile != "ambient" {
				fmt.Fprintln(out, "Made this installation the default for injection and validation.")
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&sets, "set", nil, "profile=NAME (the one setting a lab reads)")
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "an IstioOperator file (spec.profile and spec.components' gateways)")
	cmd.Flags().BoolVarP(&yes, "skip-confirmation", "y", false, "do not ask before installing")
	return cmd
}

// confirmed reads istioctl's y/N answer.
func confirmed(in io.Reader) bool {
	line, _ := bufio.NewReader(in).ReadString('\n')
	a := strings.ToLower(strings.TrimSpace(line))
	return a == "y" || a == "yes"
}

// installComponents returns the components install reports and the profile, from the
// --set values and IstioOperator files in istioctl's order (files, then --set).
func installComponents(sets, files []string) ([]string, string, error) {
	profile := "default"
	gateways := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, "", err
		}
		var iop istioOperator
		if err := yaml.UnmarshalStrict(data, &iop); err != nil {
			return nil, "", fmt.Errorf("%s: %w (meshlab's install reads an IstioOperator's spec.profile and spec.components' ingressGateways and egressGateways; mesh settings go in a MeshConfig object with meshlab apply)", f, err)
		}
		if iop.Kind != "IstioOperator" {
			return nil, "", fmt.Errorf("%s: kind %q, want IstioOperator", f, iop.Kind)
		}
		if iop.Spec.Profile != "" {
			profile = iop.Spec.Profile
		}
		for kind, gws := range map[string][]iopGateway{"ingress": iop.Spec.Components.IngressGateways, "egress": iop.Spec.Components.EgressGateways} {
			for _, gw := range gws {
				if gw.Enabled != nil {
					gateways[kind] = *gw.Enabled
				}
			}
		}
	}
	for _, s := range sets {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k != "profile" {
			return nil, "", fmt.Errorf("--set %s: meshlab's install reads only profile=NAME (mesh settings go in a MeshConfig object with meshlab apply)", s)
		}
		profile = v
	}
	comps, ok := installProfiles[profile]
	if !ok {
		names := make([]string, 0, len(installProfiles))
		for n := range installProfiles {
			names = append(names, n)
		}
		slices.Sort(names)
		return nil, "", fmt.Errorf("profile %q is not one a lab stands for (%s)", profile, strings.Join(names, ", "))
	}
	var out []string
	for _, c := range comps {
		if on, set := gateways[c]; set && !on {
			continue
		}
		out = append(out, c)
	}
	for _, c := range []string{"egress", "ingress"} {
		if gateways[c] && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out, profile, nil
}
