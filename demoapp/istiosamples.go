package demoapp

import (
	"cmp"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// IstioModuleVersion is the istio.io/istio module version meshlab is held to (fidelity/'s
// go.mod pins it; a test keeps the two equal). Its samples/ are the files Istio's docs
// fetch from raw.githubusercontent.com/istio/istio/<ref>/samples/..., which the outside
// world answers from the module in the Go module cache, whatever the ref: a lab reaches
// no real internet.
const IstioModuleVersion = "v0.0.0-20260827124520-eed52ebb66ad"

// IstioModuleDir returns the Istio module's directory in the Go module cache
// ($GOMODCACHE, else $GOPATH/pkg/mod, else ~/go/pkg/mod).
func IstioModuleDir() string {
	cache := os.Getenv("GOMODCACHE")
	if cache == "" {
		gopath, _ := filepath.Abs(cmp.Or(strings.Split(os.Getenv("GOPATH"), string(os.PathListSeparator))[0], filepath.Join(cmp.Or(os.Getenv("HOME"), "/root"), "go")))
		cache = filepath.Join(gopath, "pkg", "mod")
	}
	return filepath.Join(cache, "istio.io", "istio@"+IstioModuleVersion)
}

// IstioSampleFile returns the file of the Istio module that the raw.githubusercontent.com
// path p (/istio/istio/<ref>/samples/...) names, reporting whether p names one: only
// regular files below samples/.
func IstioSampleFile(p string) (string, bool) {
	rest, ok := strings.CutPrefix(path.Clean("/"+p), "/istio/istio/")
	if !ok {
		return "", false
	}
	_, file, ok := strings.Cut(rest, "/") // drop the ref
	if !ok || !strings.HasPrefix(file, "samples/") {
		return "", false
	}
	local := filepath.Join(IstioModuleDir(), filepath.FromSlash(file))
	if fi, err := os.Stat(local); err != nil || !fi.Mode().IsRegular() {
		return "", false
	}
	return local, true
}
