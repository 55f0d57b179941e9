package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/meshlab/meshlab/api"
)

// EventSource is the lab's event bus as the API reads it. Safe for concurrent use.
type EventSource interface {
	// Subscribe returns the retained events numbered above after, oldest first, and a
	// channel of every later event. The channel holds up to buffer events; a subscriber
	// that falls further behind has its channel closed (it may subscribe again from the
	// last Seq it saw). cancel releases the subscription and must be called.
	Subscribe(after uint64, buffer int) (history []api.Event, live <-chan api.Event, cancel func())
}

// sseHeartbeat keeps idle streams (and the proxies between) from timing out.
const sseHeartbeat = 15 * time.Second

// sseBuffer is how many events one stream may fall behind before it is cut.
const sseBuffer = 256

// EventRoutes serves GET /v1/events: server-sent events, first the retained history
// (after the Last-Event-ID header or ?after=, when given), then live events.
func EventRoutes(src EventSource) Routes {
	return func(v1 *gin.RouterGroup) {
		v1.GET("/events", func(c *gin.Context) {
			after, err := lastEventID(c.Request)
			if err != nil {
				c.JSON(http.StatusBadRequest, gin.H{"error": err.Error()})
				return
			}
			history, live, cancel := src.Subscribe(after, sseBuffer)
			defer cancel()
			streamEvents(c.Request.Context(), c.Writer, history, live)
		})
	}
}

func lastEventID(r *http.Request) (uint64, error) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("after")
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse last event id %q: %w", v, err)
	}
	return n, nil
}

// sseStart writes the headers of an event stream.
func sseStart(w gin.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	w.Flush()
}

// sseWrite writes one event; id may be empty.
func sseWrite(w gin.ResponseWriter, id string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	if id != "" {
		if _, err := fmt.Fprintf(w, "id: %s\n", id); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
		return err
	}
	w.Flush()
	return nil
}

func streamEvents(ctx context.Context, w gin.ResponseWriter, history []api.Event, live <-chan api.Event) {
	sseStart(w)
	for _, e := range history {
		if sseWrite(w, strconv.FormatUint(e.Seq, 10), e) != nil {
			return
		}
	}
	tick := time.NewTicker(sseHeartbeat)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-live:
			if !ok {
				return // fell behind: the browser reconnects with Last-Event-ID
			}
			if sseWrite(w, strconv.FormatUint(e.Seq, 10), e) != nil {
				return
			}
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil {
				return
			}
			w.Flush()
		}
	}
}
