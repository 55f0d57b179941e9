package netns

import (
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
	if err := checkName(name); err != nil {
		return nil, err
	}
	var want unix.Stat_t
	if err := unix.Stat(Path(name), &want); err != nil {
		return nil, fmt.Errorf("stat netns %q: %w", name, err)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st) != nil {
			continue
		}
		if st.Ino == want.Ino && st.Dev == want.Dev {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids, nil
}
