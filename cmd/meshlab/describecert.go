package main

import (
	"fmt"
	"io"
	"time"

	"github.com/meshlab/meshlab/web"
)

// printCert writes the workload certificate lines of `meshlab describe pod`.
func printCert(w io.Writer, c *web.WorkloadCert, now time.Time) {
	if c == nil {
		return
	}
	fmt.Fprintf(w, "Certificate:\t%s\n", c.SPIFFEID)
	if c.Serial != "" {
		fmt.Fprintf(w, "  Serial:\t%s\n", c.Serial)
		fmt.Fprintf(w, "  Not after:\t%s (in %s)\n", c.NotAfter.UTC().Format(time.RFC3339), c.NotAfter.Sub(now).Round(time.Second))
		fmt.Fprintf(w, "  Rotation:\tin %s (rotated %d times)\n", c.RotateAt.Sub(now).Round(time.Second), c.Rotations)
	}
	if c.Error != "" {
		fmt.Fprintf(w, "  Error:\t%s\n", c.Error)
	}
}
