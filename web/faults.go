package web

import (
	"context"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/meshlab/meshlab/api"
)

// FaultBackend adds, lists and clears faults. AddFault returns ErrBadFault,
// ErrUnknownPod or ErrFaultExists (wrapped, with a message naming the valid choices);
// ClearFaults clears the fault id, or every fault when id is "", returning those
// cleared (ErrUnknownFault for an id not active). Safe for concurrent use.
type FaultBackend interface {
	AddFault(ctx context.Context, spec api.FaultSpec) (api.Fault, error)
	Faults() []api.Fault
	ClearFaults(ctx context.Context, id string) ([]api.Fault, error)
}

// FaultRoutes returns GET /v1/faults, POST /v1/faults (a FaultSpec), DELETE /v1/faults
// (every fault) and DELETE /v1/faults/:id.
func FaultRoutes(b FaultBackend) Routes {
	return func(v1 *gin.RouterGroup) {
		v1.GET("/faults", func(c *gin.Context) { c.JSON(http.StatusOK, b.Faults()) })
		v1.POST("/faults", func(c *gin.Context) {
			var spec api.FaultSpec
			if err := c.ShouldBindJSON(&spec); err != nil {
				c.JSON(http.StatusBadRequest, gin.H{"error": "decode fault: " + err.Error()})
				return
			}
			f, err := b.AddFault(c.Request.Context(), spec)
			if err != nil {
				writeFaultError(c, err)
				return
			}
			c.JSON(http.StatusOK, f)
		})
		clear := func(c *gin.Context) {
			fs, err := b.ClearFaults(c.Request.Context(), c.Param("id"))
			if err != nil {
				writeFaultError(c, err)
				return
			}
			c.JSON(http.StatusOK, fs)
		}
		v1.DELETE("/faults", clear)
		v1.DELETE("/faults/:id", clear)
	}
}

func writeFaultError(c *gin.Context, err error) {
	switch {
	case errors.Is(err, api.ErrBadFault):
		c.JSON(http.StatusBadRequest, gin.H{"error": err.Error()})
	case errors.Is(err, api.ErrFaultExists):
		c.JSON(http.StatusConflict, gin.H{"error": err.Error()})
	case errors.Is(err, api.ErrUnknownFault):
		c.JSON(http.StatusNotFound, gin.H{"error": err.Error()})
	default:
		writeError(c, err)
	}
}
