package lab

import (
	"context"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/meshlab/meshlab/dataplane/agent/agentapi"
	"github.com/meshlab/meshlab/lab/istiodcp"
)

// BuildInfo is istioctl's version.BuildInfo, with its JSON names.
type BuildInfo struct {
	Version       string `json:"version"`
	GitRevision   string `json:"revision"`
	GolangVersion string `json:"golang_version"`
	BuildStatus   string `json:"status"`
	GitTag        string `json:"tag"`
}

// longForm is istioctl's BuildInfo.LongForm (%#v of version.BuildInfo).
func (b BuildInfo) longForm() string {
	return fmt.Sprintf("version.BuildInfo{Version:%q, GitRevision:%q, GolangVersion:%q, BuildStatus:%q, GitTag:%q}",
		b.Version, b.GitRevision, b.GolangVersion, b.BuildStatus, b.GitTag)
}

// ServerInfo is istioctl's version.ServerInfo: one control plane component.
type ServerInfo struct {
	Component string
	Revision  string
	Info      BuildInfo
}

// ProxyInfo is istioctl's version.ProxyInfo: one proxy, its version as it reports it.
type ProxyInfo struct {
	ID           string
	IstioVersion string
	Type         string
}

// VersionReport is istioctl's version.Version.
type VersionReport struct {
	ClientVersion    *BuildInfo   `json:"clientVersion,omitempty"`
	MeshVersion      []ServerInfo `json:"meshVersion,omitempty"`
	DataPlaneVersion []ProxyInfo  `json:"dataPlaneVersion,omitempty"`
}

// VersionOptions is what `meshlab version` prints.
type VersionOptions struct {
	Release string // required: this tree's release ("1.0.0-dev"), for a build from no tagged module
	RunRoot string // required with Lab
	Lab     string // optional: the running lab whose control plane and proxies to add; "" for none
	Output  string // optional: "json" or "yaml"; "" for istioctl's text
	Short   bool   // optional: the text form's versions only, not istioctl's long form
}

// WriteVersion prints, as `istioctl version` does, the client's version and, with a
// Lab, the version of its control plane (the lab process's binary) and of each
// sidecar's proxy (its /server_info). A proxy that cannot say is printed as unknown
// with why; a lab whose record or binary cannot be read is an error, returned after the
// rest is printed.
func WriteVersion(ctx context.Context, w io.Writer, o VersionOptions) error {
	if o.Output != "" && o.Output != "yaml" && o.Output != "json" {
		return fmt.Errorf("-o %q: want json or yaml", o.Output)
	}
	bi, _ := debug.ReadBuildInfo()
	client := BuildInfoOf(bi, o.Release)
	rep := VersionReport{ClientVersion: &client}
	var labErr error
	if o.Lab != "" {
		if err := meshVersions(ctx, PathsFor(o.RunRoot, o.Lab), o.Release, &rep); err != nil {
			labErr = fmt.Errorf("lab %s: %w", o.Lab, err)
		}
	}
	// What is known is printed even when the lab could not say the rest.
	if err := rep.write(w, o.Output, o.Short); err != nil {
		return err
	}
	return labErr
}

// BuildInfoOf reads a meshlab binary's build: its module version when it was built from
// a tagged module, else release; the VCS revision and state when the build recorded
// them.
func BuildInfoOf(bi *debug.BuildInfo, release string) BuildInfo {
	out := BuildInfo{Version: release, GitRevision: "unknown", BuildStatus: "unknown"}
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

// meshVersions adds the lab's control plane (its process's binary) and its sidecars'
// proxies to rep.
func meshVersions(ctx context.Context, paths Paths, release string, rep *VersionReport) error {
	r, err := ReadRecord(paths)
	if err != nil {
		return err
	}
	cp, err := buildinfo.ReadFile("/proc/" + strconv.Itoa(r.PID) + "/exe")
	if err != nil {
		return fmt.Errorf("read the control plane's build (pid %d): %w", r.PID, err)
	}
	rep.MeshVersion = []ServerInfo{{Component: "control plane", Revision: "default", Info: BuildInfoOf(cp, release)}}
	if r.ControlPlane == istiodcp.ControlPlaneIstiod {
		rep.MeshVersion = append(rep.MeshVersion, istiodServerInfo(r))
	}
	for _, p := range r.Pods {
		if !p.Sidecar {
			continue
		}
		info := ProxyInfo{ID: p.Name + "." + p.Namespace, Type: "sidecar"}
		c := agentapi.NewClient(paths.AgentSocket(p.Key))
		b, err := c.AdminBytes(ctx, "server_info")
		c.Close()
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

// istiodServerInfo is the lab's istiod (up --control-plane=istiod) as a control plane
// component: the istio.io/istio module version its binary was built from (a release tag,
// or a pseudo-version whose suffix is the commit), read from its running binary, else as
// recorded when it started (it has exited).
func istiodServerInfo(r *Record) ServerInfo {
	info := BuildInfo{Version: r.IstiodVersion, GitRevision: "unknown", BuildStatus: "unknown"}
	if bi, err := buildinfo.ReadFile("/proc/" + strconv.Itoa(r.IstiodPID) + "/exe"); err == nil && r.IstiodPID > 0 {
		info.GolangVersion = bi.GoVersion
		for _, d := range bi.Deps {
			if d.Path != "istio.io/istio" {
				continue
			}
			if d.Replace != nil {
				d = d.Replace
			}
			info.Version = d.Version
		}
		info.BuildStatus = "Clean"
	}
	if i := strings.LastIndex(info.Version, "-"); i > 0 && strings.Count(info.Version, "-") >= 2 {
		info.GitRevision = info.Version[i+1:]
	}
	info.GitTag = info.Version
	return ServerInfo{Component: "istiod", Revision: "default", Info: info}
}

// write prints rep as json, yaml, or istioctl's text (short or long form).
func (rep VersionReport) write(w io.Writer, output string, short bool) error {
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
func renderProxyVersions(pinfos []ProxyInfo) string {
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
