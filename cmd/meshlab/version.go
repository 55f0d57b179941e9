package main

import (
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/meshlab/meshlab/dataplane/proxy"
	"github.com/meshlab/meshlab/lab"
)

// meshlabVersion is this tree's release, as the built-in proxy reports it in its
// server_info ("meshlab/1.0.0-dev/Clean/RELEASE/Go").
var meshlabVersion = strings.Split(proxy.Version, "/")[1]

// buildInfo is istioctl's version.BuildInfo, with its JSON names.
type buildInfo struct {
	Version       string `json:"version"`
	GitRevision   string `json:"revision"`
	GolangVersion string `json:"golang_version"`
	BuildStatus   string `json:"status"`
	GitTag        string `json:"tag"`
}

// longForm is istioctl's BuildInfo.LongForm (%#v of version.BuildInfo).
func (b buildInfo) longForm() string {
	return fmt.Sprintf("version.BuildInfo{Version:%q, GitRevision:%q, GolangVersion:%q, BuildStatus:%q, GitTag:%q}",
		b.Version, b.GitRevision, b.GolangVersion, b.BuildStatus, b.GitTag)
}

// serverInfo is istioctl's version.ServerInfo: one control plane component.
type serverInfo struct {
	Component string
	Revision  string
	Info      buildInfo
}

// proxyInfo is istioctl's version.ProxyInfo: one proxy, its version as it reports it.
type proxyInfo struct {
	ID           string
	IstioVersion string
	Type         string
}

// versionReport is istioctl's version.Version.
type versionReport struct {
	ClientVersion    *buildInfo   `json:"clientVersion,omitempty"`
	MeshVersion      []serverInfo `json:"meshVersion,omitempty"`
	DataPlaneVersion []proxyInfo  `json:"dataPlaneVersion,omitempty"`
}

func newVersionCmd(g *globalFlags) *cobra.Command {
	var (
		short  bool
		output string
		remote bool
	)
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print meshlab's version, and the lab's control plane and proxy versions when a lab runs",
		Long: `Prints the client's version and, when a lab runs (the default lab, or --lab), the version
of its control plane (the lab process's binary) and of each sidecar's proxy (its
/server_info), as istioctl version does.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != "yaml" && output != "json" {
				return fmt.Errorf("-o %q: want json or yaml", output)
			}
			bi, _ := debug.ReadBuildInfo()
			client := buildInfoOf(bi)
			rep := versionReport{ClientVersion: &client}
			var labErr error
			if remote {
				labErr = meshVersions(cmd.Context(), g, &rep)
			}
			if err := printVersion(cmd.OutOrStdout(), rep, output, short); err != nil {
				return err
			}
			return labErr
		},
	}
	cmd.Flags().BoolVarP(&short, "short", "s", true, "use --short=false to print full version information")
	cmd.Flags().StringVarP(&output, "output", "o", "", "one of yaml or json")
	cmd.Flags().BoolVar(&remote, "remote", true, "use --remote=false to leave out the lab's control plane and proxies")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// buildInfoOf reads a meshlab binary's build: its module version when it was built from
// a tagged module, else this tree's release; the VCS revision and state when the build
// recorded them.
func buildInfoOf(bi *debug.BuildInfo) buildInfo {
	out := buildInfo{Version: meshlabVersion, GitRevision: "unknown", BuildStatus: "unknown"}
	if bi == nil {
		return out
	}
	out.GolangVersion = bi.GoVersion
	if v := bi.Main.Version; strings.HasPrefix(v, "v") {
		out.Version = strings.TrimPrefix(v, "v")
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			out.GitRevision = s.Value
		case "vcs.modified":
			out.BuildStatus = map[bool]string{true: "Modified", false: "Clean"}[s.Value == "true"]
		}
	}
	out.GitTag = out.Version
	return out
}

// meshVersions adds the lab's control plane and proxies to rep. No lab at all is not an
// error (the client's version is the answer); a lab that cannot be chosen is.
func meshVersions(ctx context.Context, g *globalFlags, rep *versionReport) error {
	if _, err := g.labName(); errors.Is(err, lab.ErrNoLab) {
		return nil
	}
	name, err := g.existingLab()
	if err != nil {
		return err
	}
	paths := lab.PathsFor(g.runRoot, name)
	r, err := lab.ReadRecord(paths)
	if err != nil {
		return fmt.Errorf("lab %s: %w", name, err)
	}
	cp, err := buildinfo.ReadFile("/proc/" + strconv.Itoa(r.PID) + "/exe")
	if err != nil {
		return fmt.Errorf("lab %s: read the control plane's build (pid %d): %w", name, r.PID, err)
	}
	rep.MeshVersion = []serverInfo{{Component: "control plane", Revision: "default", Info: buildInfoOf(cp)}}
	for _, p := range r.Pods {
		if !p.Sidecar {
			continue
		}
		info := proxyInfo{ID: p.Name + "." + p.Namespace, Type: "sidecar"}
		b, err := fetchAdmin(ctx, paths.AgentSocket(p.Key), "server_info")
		var si struct {
			Version string `json:"version"`
		}
		switch {
		case err != nil:
			info.IstioVersion = "unknown (" + err.Error() + ")"
		case json.Unmarshal(b, &si) != nil || si.Version == "":
			info.IstioVersion = "unknown (server_info has no version)"
		default:
			info.IstioVersion = si.Version
		}
		rep.DataPlaneVersion = append(rep.DataPlaneVersion, info)
	}
	return nil
}

func printVersion(w io.Writer, rep versionReport, output string, short bool) error {
	switch output {
	case "json":
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(w, string(b))
		return err
	case "yaml":
		b, err := yaml.Marshal(rep)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(w, string(b))
		return err
	}
	if !short {
		fmt.Fprintf(w, "client version: %s\n", rep.ClientVersion.longForm())
		for _, s := range rep.MeshVersion {
			fmt.Fprintf(w, "%s version: %s\n", s.Component, s.Info.longForm())
		}
		for _, p := range rep.DataPlaneVersion {
			fmt.Fprintf(w, "data plane version: version.ProxyInfo{ID:%q, IstioVersion:%q, Type:%q}\n", p.ID, p.IstioVersion, p.Type)
		}
		return nil
	}
	fmt.Fprintf(w, "client version: %s\n", rep.ClientVersion.Version)
	for _, s := range rep.MeshVersion {
		fmt.Fprintf(w, "%s version: %s\n", s.Component, s.Info.Version)
	}
	if len(rep.DataPlaneVersion) > 0 {
		fmt.Fprintf(w, "data plane version: %s\n", renderProxyVersions(rep.DataPlaneVersion))
	}
	return nil
}

// renderProxyVersions is istioctl's: each version with its count of proxies, sorted.
func renderProxyVersions(pinfos []proxyInfo) string {
	counts := map[string]int{}
	for _, p := range pinfos {
		counts[p.IstioVersion]++
	}
	versions := make([]string, 0, len(counts))
	for v := range counts {
		versions = append(versions, v)
	}
	slices.Sort(versions)
	parts := make([]string, 0, len(versions))
	for _, v := range versions {
		parts = append(parts, fmt.Sprintf("%s (%d proxies)", v, counts[v]))
	}
	return strings.Join(parts, ", ")
}
