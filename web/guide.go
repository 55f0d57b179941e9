package web

import (
	"context"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/meshlab/meshlab/api"
)

// GuideBackend walks a person through a lab. CheckStep, NextStep and SolveStep run
// actions and checks against the lab and block until done; safe for concurrent use
// (they run one at a time).
type GuideBackend interface {
	Guide() (api.GuideState, error)
	CheckStep(ctx context.Context) (api.GuideCheck, error)
	NextStep(ctx context.Context) (api.GuideState, error)
	SolveStep(ctx context.Context) (api.GuideCheck, error)
}

// GuideRoutes serves GET /v1/guide and POST /v1/guide/check, /v1/guide/next and
// /v1/guide/solve.
func GuideRoutes(b GuideBackend) Routes {
	return func(v1 *gin.RouterGroup) {
		v1.GET("/guide", func(c *gin.Context) {
			s, err := b.Guide()
			guideAnswer(c, s, err)
		})
		v1.POST("/guide/check", func(c *gin.Context) {
			r, err := b.CheckStep(c.Request.Context())
			guideAnswer(c, r, err)
		})
		v1.POST("/guide/next", func(c *gin.Context) {
			s, err := b.NextStep(c.Request.Context())
			guideAnswer(c, s, err)
		})
		v1.POST("/guide/solve", func(c *gin.Context) {
			r, err := b.SolveStep(c.Request.Context())
			guideAnswer(c, r, err)
		})
	}
}

func guideAnswer(c *gin.Context, v any, err error) {
	switch {
	case errors.Is(err, api.ErrNoGuide):
		c.JSON(http.StatusNotFound, gin.H{"error": err.Error()})
	case errors.Is(err, api.ErrLastStep), errors.Is(err, api.ErrNoSolution):
		c.JSON(http.StatusConflict, gin.H{"error": err.Error()})
	case err != nil:
		writeError(c, err)
	default:
		c.JSON(http.StatusOK, v)
	}
}
