package lab

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
)

// entry is one line of the journal: something the lab is about to create.
type entry struct {
	Kind  string `json:"kind"` // "netns", "process", "netns-deleted"
	Name  string `json:"name,omitempty"`
	PID   int    `json:"pid,omitempty"`
	Start uint64 `json:"start,omitempty"` // process start time, clock ticks since boot
	Role  string `json:"role,omitempty"`  // "agent", "app"
	Pod   string `json:"pod,omitempty"`
}

// journal appends entries durably, one JSON object per line. Namespaces are recorded
// before they are created; processes right after fork (their pid is unknown before), and
// they can be found through their namespace too (see Clean).
type journal struct {
	mu sync.Mutex
	f  *os.File
}

func openJournal(path string) (*journal, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	return &journal{f: f}, nil
}

func (j *journal) add(e entry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode journal entry: %w", err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, err := j.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write journal: %w", err)
	}
	return j.f.Sync()
}

func (j *journal) close() error { return j.f.Close() }

// readJournal returns every entry of the journal at path; a missing journal is empty, a
// torn last line (crash mid-write) is skipped.
func readJournal(path string) ([]entry, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read journal: %w", err)
	}
	defer f.Close()
	var out []entry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e entry
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			out = append(out, e)
		}
	}
	return out, sc.Err()
}
