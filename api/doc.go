// Package api is the lab API's wire contract: the request and answer types of every
// endpoint under /v1 on a lab's api.sock (and the dashboard), the sentinel errors the
// lab's backends return and the server maps to status codes, and Client, the one typed
// client the CLI, the lab runner and repro use. It holds no server code (that is package
// web, which imports this one) and no lab logic, so a caller talks to a lab without
// linking gin or the lab.
package api
