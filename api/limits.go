package api

import (
	"fmt"
	"io"
	"os"
)

// MaxFileBytes is the largest file of objects a client sends the lab in one ConfigFile
// (apply, delete -f) or reads as a scenario: the lab's own limit on one file
// (controlplane/config.MaxFileBytes, held equal by a test in package lab), checked before
// the client holds more of a file than that.
const MaxFileBytes = 16 << 20

// ReadLimited reads a file of objects from r, refusing one above MaxFileBytes before
// holding more of it than that; name is used in the message.
func ReadLimited(name string, r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("read %s: the file is larger than the limit of %.1f MiB for one file", name, float64(MaxFileBytes)/(1<<20))
	}
	return data, nil
}

// ReadFileLimited opens and reads path with ReadLimited.
func ReadFileLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	return ReadLimited(path, f)
}
