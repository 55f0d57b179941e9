package lab

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// processStart returns the start time of pid (field 22 of /proc/<pid>/stat, clock ticks
// since boot), which together with the pid names one process even after pid reuse.
func processStart(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces and parentheses: skip past its last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	fields := strings.Fields(s[i+1:])
	// fields[0] is field 3 (state); starttime is field 22.
	if len(fields) < 20 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	return strconv.ParseUint(fields[19], 10, 64)
}

// processAlive reports whether pid is running and is the process that started at start
// (start 0 skips that check). Zombies count as dead.
func processAlive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	if i := strings.LastIndexByte(string(b), ')'); i > 0 && i+2 < len(b) && b[i+2] == 'Z' {
		return false
	}
	if start == 0 {
		return true
	}
	got, err := processStart(pid)
	return err == nil && got == start
}
