package agentapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
)

// The agent's refusals. The agent returns ErrRenewalPaused and ErrStopping itself and
// answers each with its status code (StatusCode); the Client turns every status code
// back into the sentinel below, so that a caller branches with errors.Is, whichever side
// of the socket it is on.
var (
	// ErrRenewalPaused is a renewal asked for while renewal is paused (409).
	ErrRenewalPaused = errors.New("certificate renewal is paused")
	// ErrStopping is a restart asked for while the agent shuts down (503).
	ErrStopping = errors.New("agent is stopping")
	// ErrBadRequest is a request the agent refused as invalid (400): proxy settings that
	// do not validate or a body that does not decode.
	ErrBadRequest = errors.New("agent refused the request as invalid")
	// ErrNotFound is a path the agent (or the proxy's admin API behind /admin/) does not
	// serve (404).
	ErrNotFound = errors.New("not found")
	// ErrUpstream is a failure of what the agent stands in front of (502): the proxy's
	// admin API not reachable, or the CA refusing or unreachable during a renewal.
	ErrUpstream = errors.New("the agent's upstream failed")
	// ErrTimeout is a request whose work the agent gave up on when its context ended (504).
	ErrTimeout = errors.New("the agent timed out")
)

// codes is the one table between sentinels and status codes, read both ways.
var codes = []struct {
	err  error
	code int
}{
	{ErrRenewalPaused, http.StatusConflict},
	{ErrStopping, http.StatusServiceUnavailable},
	{ErrBadRequest, http.StatusBadRequest},
	{ErrNotFound, http.StatusNotFound},
	{ErrUpstream, http.StatusBadGateway},
	{ErrTimeout, http.StatusGatewayTimeout},
}

// StatusCode is the status the agent answers err with: the code of the sentinel err
// wraps, 504 for an ended context, else fallback (the route's code for its other
// failures, e.g. 400 for settings that do not validate).
func StatusCode(err error, fallback int) int {
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return http.StatusGatewayTimeout
	}
	return fallback
}

// Error is an answer of the agent other than 200. It wraps the sentinel of its status
// code (errors.Is(err, ErrRenewalPaused)), and errors.As finds it for the code and the
// agent's message.
type Error struct {
	Method, Path string // the request, e.g. "POST", "/certs/renew"
	Code         int    // the HTTP status
	Message      string // the agent's {"error": ...}, or the body's text
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.Code, http.StatusText(e.Code), e.Message)
}

// Unwrap returns the sentinel of e's status code, nil for a code without one.
func (e *Error) Unwrap() error {
	for _, c := range codes {
		if c.code == e.Code {
			return c.err
		}
	}
	return nil
}
