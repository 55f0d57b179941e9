//go:build !amd64

package podinit

// reaperMachine and reaperCode are unset where no reaper is written yet: the pod's init
// stays the Go process that started the app (netns's reaper loop).
const reaperMachine = 0

var reaperCode []byte
