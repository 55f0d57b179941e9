package agent

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// FuncEHomeEnv is func-e's legacy home directory variable: $FUNC_E_HOME/versions/<v>/bin/envoy.
const FuncEHomeEnv = "FUNC_E_HOME"

// FuncEVersionsDirs returns the directories func-e installs Envoy versions under, in the
// order the agent searches them: $FUNC_E_HOME/versions (func-e's legacy layout, also
// what `meshlab envoy install` uses when FUNC_E_HOME is set), ~/.func-e/versions (the
// legacy default) and ~/.local/share/func-e/envoy-versions (func-e 1.3 and later).
func FuncEVersionsDirs(getenv func(string) string, home string) []string {
	var dirs []string
	if h := getenv(FuncEHomeEnv); h != "" {
		dirs = append(dirs, filepath.Join(h, "versions"))
	}
	if home != "" {
		dirs = append(dirs, filepath.Join(home, ".func-e", "versions"),
			filepath.Join(home, ".local", "share", "func-e", "envoy-versions"))
	}
	return dirs
}

// findFuncEEnvoy returns the newest executable <dir>/<version>/bin/envoy in the first
// of dirs that has one, and reports whether it found one.
func findFuncEEnvoy(dirs []string, readDir func(string) ([]os.DirEntry, error), isExec func(string) bool) (string, bool) {
	for _, dir := range dirs {
		entries, err := readDir(dir)
		if err != nil {
			continue
		}
		var versions []string
		for _, e := range entries {
			if e.IsDir() && isExec(filepath.Join(dir, e.Name(), "bin", "envoy")) {
				versions = append(versions, e.Name())
			}
		}
		if len(versions) == 0 {
			continue
		}
		slices.SortFunc(versions, compareVersions)
		return filepath.Join(dir, versions[len(versions)-1], "bin", "envoy"), true
	}
	return "", false
}

// compareVersions orders dotted versions numerically ("1.9.1" < "1.10.0"); parts that
// are not numbers compare as text.
func compareVersions(a, b string) int {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) && i < len(pb); i++ {
		na, ea := strconv.Atoi(pa[i])
		nb, eb := strconv.Atoi(pb[i])
		switch {
		case ea == nil && eb == nil && na != nb:
			return na - nb
		case (ea != nil || eb != nil) && pa[i] != pb[i]:
			return strings.Compare(pa[i], pb[i])
		}
	}
	return len(pa) - len(pb)
}

// isExecutable reports whether path is a regular file with an execute bit.
func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
