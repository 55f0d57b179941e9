package netns

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// PIDsIn returns the pids of all processes whose network namespace is the named one
// (compare /proc/<pid>/ns/net inode with the bind mount's), for cleanup after a crash.
// Processes that exit or cannot be inspected while it scans are skipped. The result is
// sorted.
func PIDsIn(name string) ([]int, error) {
	each, err := PIDsInEach([]string{name})
	return each[name], err
}

// PIDsInEach is PIDsIn for several namespaces with one look at every process: a lab's
// cleanup asks for each of its namespaces, and scanning /proc once per namespace made
// `down` of a 1000-pod lab a million stats.
func PIDsInEach(names []string) (map[string][]int, error) {
	type ns struct{ dev, ino uint64 }
	want := make(map[ns]string, len(names))
	var errs []error // a namespace that cannot be looked at is left out, the others are not
	for _, name := range names {
		if err := checkName(name); err != nil {
			errs = append(errs, err)
			continue
		}
		var st unix.Stat_t
		if err := unix.Stat(Path(name), &st); err != nil {
			errs = append(errs, fmt.Errorf("stat netns %q: %w", name, err))
			continue
		}
		want[ns{st.Dev, st.Ino}] = name
	}
	if len(want) == 0 {
		return map[string][]int{}, errors.Join(errs...)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	out := make(map[string][]int, len(names))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st) != nil {
			continue
		}
		if name, ok := want[ns{st.Dev, st.Ino}]; ok {
			out[name] = append(out[name], pid)
		}
	}
	for _, pids := range out {
		slices.Sort(pids)
	}
	return out, errors.Join(errs...)
}
