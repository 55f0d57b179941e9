// Package rqtotals is a sidecar's request totals in a file the proxy maps and the lab
// reads without waking anyone: the sum of upstream_rq_total over the proxy's outbound
// clusters and over its inbound ones (`meshlab status`'s RQ OUT and RQ IN).
//
// Asking 500 proxies for these counters through their agents woke 1000 processes per
// `meshlab status`; the file costs each request one atomic add on a shared page, and the
// lab's read a map of 16 bytes. The agent makes the file in the pod's run directory and
// names it to meshlab-proxy in Env (Envoy ignores the variable: the lab asks an Envoy
// for its stats). A proxy that starts cold zeroes it, as its counters start at zero; a
// hot restart child keeps it, as it keeps its parent's counters, and both add to it
// while the parent drains.
package rqtotals

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// Env names the file to the proxy. File is its name in the pod's run directory.
const (
	Env  = "MESHLAB_REQUEST_TOTALS"
	File = "proxy-requests"
)

// size is the file's length: two native-endian uint64, outbound then inbound.
const size = 16

// Totals is a mapped file's two counters. A nil *Totals counts nothing.
type Totals struct {
	mem []byte
}

// Create makes the file at path, zeroed and owned by uid:gid, unless it exists.
func Create(path string, uid, gid int) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return err
	}
	return f.Chown(uid, gid)
}

// Map maps the file at path for counting.
func Map(path string) (*Totals, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	mem, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", path, err)
	}
	return &Totals{mem: mem}, nil
}

// Out and In are the counters a request adds one to; nil when t is.
func (t *Totals) Out() *atomic.Uint64 { return t.counter(0) }
func (t *Totals) In() *atomic.Uint64  { return t.counter(8) }

func (t *Totals) counter(off int) *atomic.Uint64 {
	if t == nil {
		return nil
	}
	return (*atomic.Uint64)(unsafe.Pointer(&t.mem[off]))
}

// Zero sets both counters to 0.
func (t *Totals) Zero() {
	if t != nil {
		t.Out().Store(0)
		t.In().Store(0)
	}
}

// Read returns the totals in the file at path.
func Read(path string) (out, in uint64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	mem, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return 0, 0, fmt.Errorf("map %s: %w", path, err)
	}
	defer syscall.Munmap(mem) //nolint:errcheck // read-only, nothing to lose
	t := Totals{mem: mem}
	return t.Out().Load(), t.In().Load(), nil
}
