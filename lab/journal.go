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
//
// The entries of concurrent adds share one fsync (group commit): a hundred pods starting
// at once add two entries each, and one fsync at a time under the lock, ~20 ms each on a
// disk-backed /run, lined every pod's start up behind every other's.
type journal struct {
	mu      sync.Mutex // the file's writes and written
	f       *os.File
	written uint64 // entries written so far

	syncMu sync.Mutex // one fsync at a time
	synced uint64     // entries an fsync has covered
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
	if _, err := j.f.Write(append(b, '\n')); err != nil {
		j.mu.Unlock()
		return fmt.Errorf("write journal: %w", err)
	}
	j.written++
	mine := j.written
	j.mu.Unlock()
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	if j.synced >= mine {
		return nil // an fsync that began after this write covered it
	}
	j.mu.Lock()
	upto := j.written
	j.mu.Unlock()
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("sync journal: %w", err)
	}
	j.synced = upto
	return nil
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
