package ztunnel

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when they leave goroutines behind (a pod's sockets,
// tunnels, renewals, streams must all end with the ztunnel that made them).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
