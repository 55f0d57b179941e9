package api

import (
	"errors"
	"fmt"
	"net/http"
)

// Classes of the lab API's error answers, one per status code family. Every error Client
// returns for an error answer matches exactly one of them with errors.Is, whatever the
// endpoint, and keeps the server's message as its text. The sentinels below (ErrUnknownPod,
// ErrBadFault...) belong to a class too, so a caller that holds the lab in-process sees
// the same classes as one that talks to it over api.sock.
var (
	// ErrInvalid: the request is wrong (400 Bad Request, 413, 422 Unprocessable Entity).
	ErrInvalid = errors.New("invalid request")
	// ErrNotFound: what the request names does not exist (404).
	ErrNotFound = errors.New("not found")
	// ErrConflict: the request does not fit the lab's state (409).
	ErrConflict = errors.New("conflict")
	// ErrTimeout: the lab gave up waiting (504 Gateway Timeout).
	ErrTimeout = errors.New("timed out")
	// ErrInternal: the lab failed (500 and any other status).
	ErrInternal = errors.New("lab API failed")
	// ErrUnavailable: no answer (the socket refused the connection or it broke).
	ErrUnavailable = errors.New("lab API unavailable")
)

// classed is a sentinel of its own that also matches its class.
type classed struct {
	msg   string
	class error
}

func (e *classed) Error() string { return e.msg }

// Is reports whether target is the error's class.
func (e *classed) Is(target error) bool { return target == e.class }

func sentinel(msg string, class error) error { return &classed{msg: msg, class: class} }

// ErrorClass returns the class (ErrInvalid, ErrNotFound...) of a status code, nil for
// a success.
func ErrorClass(status int) error {
	switch {
	case status >= 200 && status < 300:
		return nil
	case status == http.StatusBadRequest, status == http.StatusRequestEntityTooLarge, status == http.StatusUnprocessableEntity:
		return ErrInvalid
	case status == http.StatusNotFound:
		return ErrNotFound
	case status == http.StatusConflict:
		return ErrConflict
	case status == http.StatusGatewayTimeout:
		return ErrTimeout
	}
	return ErrInternal
}

// Error is an error answer of the lab API, or no answer at all (Status 0, Err says why).
// errors.Is matches it to its class (ErrNotFound for a 404...).
type Error struct {
	Method string
	Path   string
	Status int // the HTTP status; 0 when the lab did not answer
	// Message is the server's message, the "error" of its JSON answer ("" when the answer
	// had none; Body holds what it had).
	Message string
	Body    string
	Err     error // why there was no answer, for Status 0
}

// Error returns the server's message as it wrote it, or says what came back instead.
func (e *Error) Error() string {
	switch {
	case e.Status == 0:
		return fmt.Sprintf("call lab API %s: %v", e.Path, e.Err)
	case e.Message != "":
		return e.Message
	}
	return fmt.Sprintf("call lab API %s %s: %d %s: %s", e.Method, e.Path, e.Status, http.StatusText(e.Status), e.Body)
}

// Unwrap returns why there was no answer (nil for an error answer).
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is the answer's class (ErrUnavailable for no answer).
func (e *Error) Is(target error) bool {
	if e.Status == 0 {
		return target == ErrUnavailable
	}
	return target == ErrorClass(e.Status)
}
