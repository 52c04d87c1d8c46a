package cluster

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx"
)

// The internal endpoints, on the client port, through which the nodes
// run executor tool calls for each other. They take only requests
// carrying the cluster secret.
const (
	internalPrefix = "/internal/cluster/"
	callPath       = internalPrefix + "v1/executor/call"
	releasePath    = internalPrefix + "v1/executor/release"
)

// maxInternalBody bounds an internal request body: a call's input is at
// most one executor message.
const maxInternalBody = 16 << 20

// progressBuffer is how many progress reports of one call wait for the
// stream at most; more are dropped (tool.progress is lossy anyway), so
// that the executor connection's reader never waits for the caller.
const progressBuffer = 64

// callRequest is the body of POST /internal/cluster/v1/executor/call: a
// baton.ExecutorCall without its callback.
type callRequest struct {
	SessionID     string          `json:"session_id"`
	ProfileID     string          `json:"profile_id,omitempty"`
	EnvironmentID string          `json:"environment_id"`
	ToolCallID    string          `json:"tool_call_id"`
	Name          string          `json:"name"`
	Input         json.RawMessage `json:"input,omitempty"`
	TimeoutMS     int64           `json:"timeout_ms,omitempty"` // 0: none
}

func newCallRequest(c baton.ExecutorCall) callRequest {
	r := callRequest{SessionID: c.SessionID, ProfileID: c.ProfileID, EnvironmentID: c.EnvironmentID,
		ToolCallID: c.ToolCallID, Name: c.Name, Input: c.Input}
	if c.Timeout > 0 { // rounded up: a timeout never becomes none
		r.TimeoutMS = int64((c.Timeout + time.Millisecond - 1) / time.Millisecond)
	}
	return r
}

func (r callRequest) call() baton.ExecutorCall {
	return baton.ExecutorCall{SessionID: r.SessionID, ProfileID: r.ProfileID, EnvironmentID: r.EnvironmentID,
		ToolCallID: r.ToolCallID, Name: r.Name, Input: r.Input, Timeout: time.Duration(r.TimeoutMS) * time.Millisecond}
}

// callFrame is one line of the call's NDJSON answer: zero or more
// progress lines, then exactly one result or error line.
type callFrame struct {
	Progress *baton.ExecutorProgress `json:"progress,omitempty"`
	Result   *callResult             `json:"result,omitempty"`
	Error    *callError              `json:"error,omitempty"`
}

type callResult struct {
	ExecutorID string          `json:"executor_id,omitempty"`
	Content    json.RawMessage `json:"content,omitempty"`
	IsError    bool            `json:"is_error"`
}

// callError is a call that got no result: the baton error the serving
// node's hands returned, whose message is written for the model.
type callError struct {
	Code       string `json:"code"`
	Message    string `json:"message"`
	ExecutorID string `json:"executor_id,omitempty"`
}

// releaseRequest is the body of POST /internal/cluster/v1/executor/release.
type releaseRequest struct {
	SessionID string `json:"session_id"`
}

// Mount wraps the client port's handler: the other nodes' requests under
// /internal/cluster/ are served by Handler, every other request by next.
// Put it outside Forward, so that they are never forwarded.
func (x *Hands) Mount(next http.Handler) http.Handler {
	internal := x.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, internalPrefix) {
			internal.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Handler serves the internal endpoints, which run other nodes' executor
// calls on Local:
//
//	POST /internal/cluster/v1/executor/call     callRequest → NDJSON callFrame lines, flushed as they come
//	POST /internal/cluster/v1/executor/release  releaseRequest → 204
//
// Every request must carry "Authorization: Bearer <cluster secret>";
// any other is 401, whatever its path.
func (x *Hands) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST "+callPath, httpx.Handle(x.log, x.serveCall))
	mux.Handle("POST "+releasePath, httpx.Handle(x.log, x.serveRelease))
	routes := httpx.Routes(mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !x.authorized(r) {
			w.Header().Set("WWW-Authenticate", "Bearer")
			httpx.WriteError(w, r, x.log, baton.Errorf(baton.ECodeUnauthorized, "this endpoint serves the nodes of the cluster only"))
			return
		}
		routes.ServeHTTP(w, r)
	})
}

// authorized reports whether r carries the cluster secret.
func (x *Hands) authorized(r *http.Request) bool {
	token, err := httpx.Bearer(r)
	if err != nil || x.opts.Secret == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(token), []byte(x.opts.Secret)) == 1
}

// decodeBody reads r's JSON body, at most maxInternalBody bytes, into v.
// It reads the body to its end, which lifts the server's body deadline
// and lets net/http notice a caller that goes away during a long call.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxInternalBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return baton.Errorf(baton.ECodePayloadTooLarge, "request body larger than %d bytes", maxInternalBody)
	case err != nil:
		return baton.Errorf(baton.ECodeBadRequest, "read request body: %v", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return baton.Errorf(baton.ECodeBadRequest, "invalid request body: %v", err)
	}
	return nil
}

// decodeCallRequest reads and checks a call's body.
func decodeCallRequest(w http.ResponseWriter, r *http.Request) (callRequest, error) {
	var req callRequest
	if err := decodeBody(w, r, &req); err != nil {
		return req, err
	}
	return req, req.check()
}

func (r callRequest) check() error {
	switch {
	case r.SessionID == "", r.EnvironmentID == "", r.ToolCallID == "", r.Name == "":
		return baton.Errorf(baton.ECodeBadRequest, "session_id, environment_id, tool_call_id and name are required")
	case r.TimeoutMS < 0:
		return baton.Errorf(baton.ECodeBadRequest, "timeout_ms must not be negative")
	}
	return nil
}

// outcome is what Local's Call returned.
type outcome struct {
	res baton.ExecutorResult
	err error
}

// serveCall runs another node's call on Local with the request's
// context, so that a caller that goes away cancels it, and streams its
// progress and then its outcome.
func (x *Hands) serveCall(w http.ResponseWriter, r *http.Request) error {
	req, err := decodeCallRequest(w, r)
	if err != nil {
		return err
	}
	c := req.call()
	progress := make(chan baton.ExecutorProgress, progressBuffer)
	c.OnProgress = func(p baton.ExecutorProgress) {
		select {
		case progress <- p:
		default: // the caller is slow: drop it
		}
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := x.opts.Local.Call(r.Context(), c)
		done <- outcome{res, err}
	}()

	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	write := func(f callFrame) error {
		b, err := baton.EncodeJSON(f)
		if err != nil {
			return err
		}
		_ = rc.SetWriteDeadline(time.Now().Add(httpx.DefaultWriteTimeout))
		if _, err := w.Write(append(b, '\n')); err != nil {
			return err
		}
		return rc.Flush()
	}
	broken := false // the caller is gone: Local's Call ends with the request's context
	for {
		select {
		case p := <-progress:
			if !broken && write(callFrame{Progress: &p}) != nil {
				broken = true
			}
		case o := <-done:
			if broken {
				return nil
			}
		drain: // reports sent before the outcome go first
			for {
				select {
				case p := <-progress:
					if write(callFrame{Progress: &p}) != nil {
						return nil
					}
				default:
					break drain
				}
			}
			return write(x.frame(r.Context(), c, o))
		}
	}
}

// frame is the last line of a call's answer.
func (x *Hands) frame(ctx context.Context, c baton.ExecutorCall, o outcome) callFrame {
	if o.err == nil {
		return callFrame{Result: &callResult{ExecutorID: o.res.ExecutorID, Content: o.res.Content, IsError: o.res.IsError}}
	}
	e := &callError{Code: baton.ErrorCode(o.err), Message: baton.ErrorMessage(o.err), ExecutorID: o.res.ExecutorID}
	if e.Code == baton.ECodeInternal { // the detail stays in this node's log
		if ctx.Err() == nil {
			x.log.Warn("executor call for another node failed", "node_id", x.opts.ID, "session_id", c.SessionID,
				"tool", c.Name, "tool_call_id", c.ToolCallID, "err", o.err)
		}
		e.Message = fmt.Sprintf("tool '%s' failed on its executor", c.Name)
	}
	return callFrame{Error: e}
}

// serveRelease releases a session's bindings on Local.
func (x *Hands) serveRelease(w http.ResponseWriter, r *http.Request) error {
	var req releaseRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	if req.SessionID == "" {
		return baton.Errorf(baton.ECodeBadRequest, "session_id is required")
	}
	x.opts.Local.Release(req.SessionID)
	w.WriteHeader(http.StatusNoContent)
	return nil
}
