// Package httpx is the HTTP plumbing the client port (httpapi) and the admin
// port (adminapi) share: the RFC 7807 problem writer with the one table that
// maps baton error codes to HTTP statuses, BAE's plain-text framework
// rejections, request ids and access logging, size-limited JSON body
// reading, bearer-token parsing, pagination, and a small server with
// Open/URL/Shutdown/Close.
//
// Handlers are written as HandlerFunc, which returns an error instead of
// writing one; Handle renders that error exactly once:
//
//	mux.Handle("GET /api/v1/meta", httpx.Handle(log, func(w http.ResponseWriter, r *http.Request) error {
//		return httpx.WriteJSON(w, http.StatusOK, meta)
//	}))
//
// Errors carrying a baton code become a problem body whose `type` is the
// code; a *Rejection becomes a plain-text body; anything else is internal:
// the wire gets a generic detail with the request id and the log gets the
// error under the same id. An error returned after the response has
// started is never rendered: a failed write means the client hung up and
// is logged at DEBUG; anything else is logged at ERROR.
package httpx
