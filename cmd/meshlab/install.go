package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/meshlab/meshlab/api"
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

// istioOperator is the part of an IstioOperator file install reads: the profile, the mesh
// config and the gateways turned on or off (Getting Started's demo-profile-no-gateways.yaml).
type istioOperator struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name,omitempty"`
		Namespace string `json:"namespace,omitempty"`
	} `json:"metadata"`
	Spec struct {
		Profile    string         `json:"profile,omitempty"`
		MeshConfig map[string]any `json:"meshConfig,omitempty"`
		// Values holds values.global.certificates alone, the DNS certificates page's
		// older form of meshConfig.certificates; any other value is refused.
		Values struct {
			Global struct {
				Certificates []iopDNSCert `json:"certificates,omitempty"`
			} `json:"global"`
		} `json:"values"`
		Components struct {
			IngressGateways []iopGateway `json:"ingressGateways,omitempty"`
			EgressGateways  []iopGateway `json:"egressGateways,omitempty"`
		} `json:"components"`
	} `json:"spec"`
}

// iopDNSCert is one of meshConfig.certificates (or values.global.certificates): a DNS
// certificate istiod keeps in the Secret secretName of istio-system.
type iopDNSCert struct {
	SecretName string   `json:"secretName"`
	DNSNames   []string `json:"dnsNames"`
}

type iopGateway struct {
	Name    string `json:"name"`
	Enabled *bool  `json:"enabled,omitempty"`
	// K8s is what install takes of the component's Kubernetes settings: the gateway
	// Deployment's pod annotations and the istio-proxy container's environment (the
	// secure-metrics page's podAnnotations). Read as written, then strictly into
	// iopGatewayK8s (readGatewayK8s), so that any other k8s field is refused by name.
	K8s map[string]any `json:"k8s,omitempty"`
}

type iopGatewayK8s struct {
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`
	Env            []iopEnvVar       `json:"env,omitempty"`
}

// iopEnvVar is one of k8s.env with a literal value (valueFrom is refused by name).
type iopEnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// newInstallCmd is istioctl install as Istio's task pages run it. A lab has its control
// plane from the start: meshlab's own istiod, the node agent and ztunnel for ambient pods;
// the profile's ingress and egress gateways come with the install (the lab reads them
// from the installed-state kept on the MeshConfig). So install
// checks what it is given (a profile the lab stands for, an IstioOperator it reads,
// refusing by name what it does not), makes the lab's mesh config the one the install
// describes (meshConfig.* from --set and the file, over the profile's: see
// installMeshConfig) and prints istioctl's lines for the profile's components.
func newInstallCmd(g *globalFlags) *cobra.Command {
	var sets, files []string
	var yes bool
	cmd := &cobra.Command{
		Use:   "install [--set profile=demo|default|minimal|ambient] [--set meshConfig.FIELD=VALUE] [-f ISTIO_OPERATOR.yaml] [-y]",
		Short: "Install Istio into the lab, as istioctl install (a lab has its control plane already: this sets the mesh config and says what the profile has)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			plan, err := readInstallFrom(sets, files, cmd.InOrStdin())
			if err != nil {
				return err
			}
			c, err := g.apiClient()
			if err != nil {
				return err
			}
			defer c.Close()
			out := cmd.OutOrStdout()
			if !yes {
				fmt.Fprintf(out, "This will install the Istio profile %q into the cluster. Proceed? (y/N) ", plan.profile)
				if !confirmed(cmd.InOrStdin()) {
					return fmt.Errorf("cancelled")
				}
			}
			state, err := json.Marshal(installedState(plan, time.Now()))
			if err != nil {
				return err
			}
			if err := setMeshConfig(cmd.Context(), c, plan.meshConfig(), map[string]any{installedStateAnnotation: string(state)}); err != nil {
				return err
			}
			for _, comp := range plan.components {
				fmt.Fprintln(out, installLines[comp])
			}
			fmt.Fprintln(out, "✔ Installation complete")
			if plan.profile != "ambient" {
				fmt.Fprintln(out, "Made this installation the default for injection and validation.")
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&sets, "set", nil, "profile=NAME, or meshConfig.FIELD=VALUE for the mesh config fields a lab honours ("+strings.Join(meshConfigInstallFields, ", ")+")")
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "an IstioOperator file (spec.profile, spec.meshConfig and spec.components' gateways)")
	cmd.Flags().BoolVarP(&yes, "skip-confirmation", "y", false, "do not ask before installing")
	return cmd
}

// installAlwaysOn are the istiod settings (values.pilot.env.*) Istio's pages turn on that
// meshlab's control plane has on always, so install takes them as it finds them: it
// tracks the distribution of every config change to every proxy (apply --wait,
// proxy-status' SYNCED), and it reads the Gateway API's alpha kinds (TLSRoute, TCPRoute)
// as well as the standard ones. Turning them off is refused, as any other values.*.
var installAlwaysOn = map[string]string{
	"values.pilot.env.PILOT_ENABLE_CONFIG_DISTRIBUTION_TRACKING": "true",
	"values.pilot.env.PILOT_ENABLE_ALPHA_GATEWAY_API":            "true",
}

// installPilotEnv are the istiod settings (values.pilot.env.NAME=true|false) install takes
// and the lab's control plane honours, kept in the installed-state's values.pilot.env
// where the config loader reads them: ENABLE_TLS_ON_SIDECAR_INGRESS lets a Sidecar's
// ingress tls terminate TLS on the sidecar (the sidecar TLS termination task).
var installPilotEnv = []string{"ENABLE_TLS_ON_SIDECAR_INGRESS"}

// installAlwaysOnSets are installAlwaysOn as --set spells them, sorted.
func installAlwaysOnSets() []string {
	var out []string
	for k, v := range installAlwaysOn {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// confirmed reads istioctl's y/N answer.
func confirmed(in io.Reader) bool {
	line, _ := bufio.NewReader(in).ReadString('\n')
	a := strings.ToLower(strings.TrimSpace(line))
	return a == "y" || a == "yes"
}

// meshConfigInstallFields are the MeshConfig fields install sets in the lab (meshlab's
// MeshConfig honours these; any other meshConfig field is refused by name).
var meshConfigInstallFields = []string{"accessLogEncoding", "accessLogFile", "accessLogFormat", "meshMTLS.minProtocolVersion", "outboundTrafficPolicy.mode", "rootNamespace", "trustDomain", "trustDomainAliases"}

// meshConfigStructuredFields are the install fields carried into the lab's MeshConfig as
// written (objects, lists of objects, booleans), which the MeshConfig loader then checks
// field by field, naming what meshlab does not honour: the tracing pages' enableTracing,
// defaultConfig.tracing and extensionProviders, the otel-provider page's
// extensionProviders (envoyOtelAls) and defaultProviders.accessLogging.
var meshConfigStructuredFields = []string{"defaultConfig", "defaultProviders", "enableTracing", "extensionProviders"}

// meshConfigListFields are the install fields that hold a list: an IstioOperator writes
// it as a YAML list, --set one item at a time (meshConfig.trustDomainAliases[0]=old-td).
var meshConfigListFields = []string{"trustDomainAliases"}

// setListItem matches --set's FIELD[INDEX] form of a list item.
var setListItem = regexp.MustCompile(`^([A-Za-z]+)\[([0-9]+)\]$`)

// installPlan is what an install describes: the profile, the components istioctl
// reports, and the meshConfig fields given (dotted paths, as --set spells them).
type installPlan struct {
	profile    string
	components []string
	mesh       map[string]string
	lists      map[string][]string // the list fields (meshConfigListFields)
	pilotEnv   map[string]string   // installPilotEnv given, "true" or "false"
	structured map[string]any      // meshConfigStructuredFields given, as written
	// certificates are meshConfig.certificates (or values.global.certificates): the
	// DNS certificates the lab provisions into Secrets (lab/dnscerts.go).
	certificates []iopDNSCert
	// gatewayK8s are the gateways' k8s settings given, by gateway name, which the
	// installed-state keeps and the lab reads (controlplane/config/gateway.go).
	gatewayK8s map[string]*iopGatewayK8s
}

// meshConfig is the spec of the lab's MeshConfig after the install: the fields given,
// over the profile's. Istio's demo profile logs access to /dev/stdout, as a lab does by
// default; its other profiles log none (accessLogFile "").
func (p installPlan) meshConfig() map[string]any {
	spec := map[string]any{}
	if p.profile != "demo" {
		spec["accessLogFile"] = ""
	}
	for k, v := range p.mesh {
		if parent, child, ok := strings.Cut(k, "."); ok {
			m, _ := spec[parent].(map[string]any)
			if m == nil {
				m = map[string]any{}
				spec[parent] = m
			}
			m[child] = v
			continue
		}
		spec[k] = v
	}
	for k, v := range p.lists {
		spec[k] = v
	}
	for k, v := range p.structured {
		spec[k] = v
	}
	if len(p.certificates) > 0 {
		certs := make([]any, 0, len(p.certificates))
		for _, c := range p.certificates {
			certs = append(certs, map[string]any{"secretName": c.SecretName, "dnsNames": c.DNSNames})
		}
		spec["certificates"] = certs
	}
	return spec
}

// installComponents returns the components install reports and the profile.
func installComponents(sets, files []string) ([]string, string, error) {
	p, err := readInstall(sets, files)
	return p.components, p.profile, err
}

// readInstall reads the --set values and IstioOperator files in istioctl's order (files,
// then --set).
func readInstall(sets, files []string) (installPlan, error) {
	return readInstallFrom(sets, files, nil)
}

// readInstallFrom is readInstall with stdin for a file named "-", as istioctl install -f -
// reads it (the tracing sampling page pipes its IstioOperator in).
func readInstallFrom(sets, files []string, stdin io.Reader) (installPlan, error) {
	profile := "default"
	gateways := map[string]bool{}
	mesh := map[string]string{}
	lists := map[string][]string{}
	pilotEnv := map[string]string{}
	structured := map[string]any{}
	gatewayK8s := map[string]*iopGatewayK8s{}
	var certificates []iopDNSCert
	for _, f := range files {
		var data []byte
		var err error
		if f == "-" && stdin != nil {
			data, err = io.ReadAll(stdin)
		} else {
			data, err = os.ReadFile(f)
		}
		if err != nil {
			return installPlan{}, err
		}
		var iop istioOperator
		if err := yaml.UnmarshalStrict(data, &iop); err != nil {
			return installPlan{}, fmt.Errorf("%s: %w (meshlab's install reads an IstioOperator's spec.profile, spec.meshConfig, spec.values.global.certificates and spec.components' ingressGateways and egressGateways: name, enabled, k8s)", f, err)
		}
		if iop.Kind != "IstioOperator" {
			return installPlan{}, fmt.Errorf("%s: kind %q, want IstioOperator", f, iop.Kind)
		}
		if iop.Spec.Profile != "" {
			profile = iop.Spec.Profile
		}
		for _, k := range meshConfigStructuredFields {
			if v, ok := iop.Spec.MeshConfig[k]; ok {
				structured[k] = v
				delete(iop.Spec.MeshConfig, k)
			}
		}
		if c, ok := iop.Spec.MeshConfig["certificates"]; ok {
			delete(iop.Spec.MeshConfig, "certificates")
			js, _ := json.Marshal(c)
			var list []iopDNSCert
			if err := yaml.UnmarshalStrict(js, &list); err != nil {
				return installPlan{}, fmt.Errorf("%s: spec.meshConfig.certificates: %w (a list of secretName and dnsNames)", f, err)
			}
			certificates = list
		}
		if c := iop.Spec.Values.Global.Certificates; c != nil {
			certificates = c
		}
		if err := flattenMeshConfig("", iop.Spec.MeshConfig, mesh, lists); err != nil {
			return installPlan{}, fmt.Errorf("%s: spec.meshConfig.%w", f, err)
		}
		for kind, gws := range map[string][]iopGateway{"ingress": iop.Spec.Components.IngressGateways, "egress": iop.Spec.Components.EgressGateways} {
			for i, gw := range gws {
				if gw.Enabled != nil {
					gateways[kind] = *gw.Enabled
				}
				if gw.K8s != nil {
					k8s, err := readGatewayK8s(gw)
					if err != nil {
						return installPlan{}, fmt.Errorf("%s: spec.components.%sGateways[%d].k8s: %w", f, kind, i, err)
					}
					gatewayK8s[gw.Name] = k8s
				}
			}
		}
	}
	for _, s := range sets {
		k, v, ok := strings.Cut(s, "=")
		switch {
		case ok && k == "profile":
			profile = v
		case ok && strings.HasPrefix(k, "meshConfig."):
			field := strings.TrimPrefix(k, "meshConfig.")
			if m := setListItem.FindStringSubmatch(field); m != nil && slices.Contains(meshConfigListFields, m[1]) {
				// istioctl's FIELD[i]=v: item i of the list, the items before it given first.
				i, _ := strconv.Atoi(m[2])
				if i > len(lists[m[1]]) {
					return installPlan{}, fmt.Errorf("--set %s: meshConfig.%s has %d items: set [%d] first", s, m[1], len(lists[m[1]]), len(lists[m[1]]))
				}
				if i == len(lists[m[1]]) {
					lists[m[1]] = append(lists[m[1]], v)
				} else {
					lists[m[1]][i] = v
				}
				continue
			}
			if field == "enableTracing" && (v == "true" || v == "false") {
				structured[field] = v == "true"
				continue
			}
			if !slices.Contains(meshConfigInstallFields, field) {
				return installPlan{}, fmt.Errorf("--set %s: meshlab's mesh config does not honour meshConfig.%s (it honours %s)", s, field, strings.Join(meshConfigInstallFields, ", "))
			}
			if slices.Contains(meshConfigListFields, field) {
				return installPlan{}, fmt.Errorf("--set %s: meshConfig.%s is a list: set its items as meshConfig.%s[0]=VALUE, or write it in an IstioOperator file (-f)", s, field, field)
			}
			mesh[field] = v
		case ok && installAlwaysOn[k] == v:
			// what the lab's control plane does anyway (installAlwaysOn)
		case ok && slices.Contains(installPilotEnv, strings.TrimPrefix(k, "values.pilot.env.")) && (v == "true" || v == "false"):
			pilotEnv[strings.TrimPrefix(k, "values.pilot.env.")] = v
		default:
			return installPlan{}, fmt.Errorf("--set %s: meshlab's install reads profile=NAME, meshConfig.FIELD=VALUE (%s), %s and values.pilot.env.%s=true|false; other values.* and components.* shape a Kubernetes install a lab does not have", s, strings.Join(meshConfigInstallFields, ", "), strings.Join(installAlwaysOnSets(), ", "), strings.Join(installPilotEnv, ", "))
		}
	}
	comps, ok := installProfiles[profile]
	if !ok {
		names := make([]string, 0, len(installProfiles))
		for n := range installProfiles {
			names = append(names, n)
		}
		slices.Sort(names)
		return installPlan{}, fmt.Errorf("profile %q is not one a lab stands for (%s)", profile, strings.Join(names, ", "))
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
	return installPlan{profile: profile, components: out, mesh: mesh, lists: lists, pilotEnv: pilotEnv, structured: structured, certificates: certificates, gatewayK8s: gatewayK8s}, nil
}

// flattenMeshConfig adds an IstioOperator's meshConfig to mesh as dotted paths (and its
// list fields to lists), refusing a field the lab's mesh config does not honour.
func flattenMeshConfig(prefix string, m map[string]any, mesh map[string]string, lists map[string][]string) error {
	for k, v := range m {
		path := prefix + k
		if sub, ok := v.(map[string]any); ok {
			if err := flattenMeshConfig(path+".", sub, mesh, lists); err != nil {
				return err
			}
			continue
		}
		if !slices.Contains(meshConfigInstallFields, path) {
			return fmt.Errorf("%s: meshlab's mesh config does not honour it (it honours %s)", path, strings.Join(meshConfigInstallFields, ", "))
		}
		items, isList := v.([]any)
		switch wantList := slices.Contains(meshConfigListFields, path); {
		case wantList && !isList:
			return fmt.Errorf("%s: %v is not a list (write it as a YAML list)", path, v)
		case !wantList && isList:
			return fmt.Errorf("%s: %v is a list, the field holds one value", path, v)
		}
		if isList {
			lists[path] = nil
			for _, it := range items {
				lists[path] = append(lists[path], fmt.Sprint(it))
			}
			continue
		}
		mesh[path] = fmt.Sprint(v)
	}
	return nil
}

// setMeshConfig makes spec the lab's one MeshConfig, replacing the one it has (install
// owns the mesh config, as istioctl owns the istio ConfigMap), with annotations (install's
// installed-state); an empty spec without annotations removes it.
func setMeshConfig(ctx context.Context, c *api.Client, spec, annotations map[string]any) error {
	have, err := c.Objects(ctx, "MeshConfig", "", "")
	if err != nil {
		return err
	}
	name, namespace := "mesh", ""
	if len(have) > 0 {
		name, namespace = have[0].Name, have[0].Namespace
	}
	if len(spec) == 0 && len(annotations) == 0 {
		if len(have) == 0 {
			return nil
		}
		_, err := c.Delete(ctx, api.DeleteRequest{Refs: []api.ObjectRef{{Kind: "MeshConfig", Namespace: namespace, Name: name}}})
		return err
	}
	meta := map[string]any{"name": name}
	if len(annotations) > 0 {
		meta["annotations"] = annotations
	}
	if namespace != "" {
		meta["namespace"] = namespace
	}
	data, err := yaml.Marshal(map[string]any{"apiVersion": "meshlab.dev/v1alpha1", "kind": "MeshConfig", "metadata": meta, "spec": spec})
	if err != nil {
		return err
	}
	_, err = c.Apply(ctx, []api.ConfigFile{{Name: "istioctl install", Data: string(data)}})
	return err
}

// readGatewayK8s reads a gateway component's k8s settings: podAnnotations and env of
// literal values, on one of the two gateways a lab makes. Anything else is refused by
// name: it shapes a Kubernetes Deployment (resources, replicas, affinity, ...) that a
// lab's gateway pod does not have.
func readGatewayK8s(gw iopGateway) (*iopGatewayK8s, error) {
	if gw.Name != "istio-ingressgateway" && gw.Name != "istio-egressgateway" {
		return nil, fmt.Errorf("gateway %q: meshlab makes the gateways istio-ingressgateway and istio-egressgateway only", gw.Name)
	}
	js, err := json.Marshal(gw.K8s)
	if err != nil {
		return nil, err
	}
	var k8s iopGatewayK8s
	if err := yaml.UnmarshalStrict(js, &k8s); err != nil {
		return nil, fmt.Errorf("%w (meshlab's install takes a gateway's k8s.podAnnotations and k8s.env with literal values; the other k8s settings shape a Kubernetes Deployment a lab's gateway pod does not have)", err)
	}
	for i, e := range k8s.Env {
		if e.Name == "" {
			return nil, fmt.Errorf("env[%d].name: is required", i)
		}
	}
	return &k8s, nil
}
