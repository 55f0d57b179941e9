package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/meshlab/meshlab/api"
)

// ConfigStore applies, deletes and lists the lab's objects. Apply and Delete are atomic
// and serialised; every method is safe for concurrent use.
type ConfigStore interface {
	Apply(ctx context.Context, files []api.ConfigFile) ([]api.Change, error)
	Delete(ctx context.Context, files []api.ConfigFile, refs []api.ObjectRef) ([]api.Change, error)
	// Objects lists objects by kind ("" or "all" for every kind), namespace and name
	// ("" for any).
	Objects(kind, namespace, name string) ([]api.ConfigObject, error)
	// Kinds lists the kinds of object the lab holds, with every spelling of each.
	Kinds() api.Kinds
}

// ProxyStatusReader reports every proxy's xDS state. Safe for concurrent use; it does not
// block.
type ProxyStatusReader interface {
	ProxyStatus() []api.ProxyStatus
}

// ConfigRoutes serves POST /v1/apply, POST /v1/delete, GET /v1/objects?kind=&namespace=&name=,
// GET /v1/kinds and GET /v1/proxy-status.
func ConfigRoutes(s ConfigStore, ps ProxyStatusReader) Routes {
	answer := func(c *gin.Context, changes []api.Change, err error) {
		var ce *api.ConfigError
		var conflict *api.ConflictError
		switch {
		case errors.As(err, &conflict):
			c.JSON(http.StatusConflict, gin.H{"error": conflict.Error()})
		case errors.As(err, &ce):
			c.JSON(http.StatusUnprocessableEntity, gin.H{"error": err.Error()})
		case err != nil:
			c.JSON(http.StatusInternalServerError, gin.H{"error": err.Error()})
		default:
			c.JSON(http.StatusOK, api.ChangeResult{Changes: changes})
		}
	}
	return func(v1 *gin.RouterGroup) {
		v1.POST("/apply", func(c *gin.Context) {
			var r api.ApplyRequest
			if !bindConfigRequest(c, &r) {
				return
			}
			if len(r.Files) == 0 {
				c.JSON(http.StatusBadRequest, gin.H{"error": "no files to apply"})
				return
			}
			changes, err := s.Apply(c.Request.Context(), r.Files)
			answer(c, changes, err)
		})
		v1.POST("/delete", func(c *gin.Context) {
			var r api.DeleteRequest
			if !bindConfigRequest(c, &r) {
				return
			}
			if len(r.Files) == 0 && len(r.Refs) == 0 {
				c.JSON(http.StatusBadRequest, gin.H{"error": "nothing to delete"})
				return
			}
			changes, err := s.Delete(c.Request.Context(), r.Files, r.Refs)
			answer(c, changes, err)
		})
		v1.GET("/objects", func(c *gin.Context) {
			objs, err := s.Objects(c.Query("kind"), c.Query("namespace"), c.Query("name"))
			var ce *api.ConfigError
			switch {
			case errors.As(err, &ce):
				c.JSON(http.StatusBadRequest, gin.H{"error": err.Error()})
			case err != nil:
				c.JSON(http.StatusInternalServerError, gin.H{"error": err.Error()})
			default:
				c.JSON(http.StatusOK, objs)
			}
		})
		v1.GET("/kinds", func(c *gin.Context) {
			c.JSON(http.StatusOK, s.Kinds())
		})
		v1.GET("/proxy-status", func(c *gin.Context) {
			c.JSON(http.StatusOK, ps.ProxyStatus())
		})
	}
}

// MaxConfigRequestBytes bounds the body of an apply or delete: the files it carries (at
// most controlplane/config's 16 MiB each, as JSON strings) and room for escaping.
const MaxConfigRequestBytes = 64 << 20

// bindConfigRequest decodes the JSON body into r, reading at most MaxConfigRequestBytes;
// it answers 413 or 400 itself and reports whether r is ready.
func bindConfigRequest(c *gin.Context, r any) bool {
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, MaxConfigRequestBytes)
	err := c.ShouldBindJSON(r)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		c.JSON(http.StatusRequestEntityTooLarge, gin.H{"error": fmt.Sprintf("decode request: the request is larger than the limit of %d bytes", tooLarge.Limit)})
		return false
	case err != nil:
		c.JSON(http.StatusBadRequest, gin.H{"error": "decode request: " + err.Error()})
		return false
	}
	return true
}
