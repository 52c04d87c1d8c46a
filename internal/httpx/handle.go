package httpx

import (
	"bufio"
	"errors"
	"log/slog"
	"net"
	"net/http"
)

// HandlerFunc is an HTTP handler that returns its error for Handle to
// render.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// Handle adapts h to an http.Handler that writes h's error with WriteError.
// An error returned after the response has started is never rendered (the
// status line is gone; a second one would only make net/http complain):
// when the client went away (a failed write, a cancelled request) it is
// logged at DEBUG as a client disconnect, otherwise at ERROR.
func Handle(log *slog.Logger, h HandlerFunc) http.Handler { return serve(log, h, WriteError) }

// HandleV1 is Handle for the /v1 routes: h's error is written with
// WriteV1Error.
func HandleV1(log *slog.Logger, h HandlerFunc) http.Handler { return serve(log, h, WriteV1Error) }

// serve runs h behind a startedWriter and renders its error with render
// only while the response has not started.
func serve(log *slog.Logger, h HandlerFunc, render func(http.ResponseWriter, *http.Request, *slog.Logger, error)) http.Handler {
	log = logger(log)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &startedWriter{ResponseWriter: w}
		err := h(sw, r)
		switch {
		case err == nil:
		case !sw.started:
			render(sw, r, log, err)
		default:
			level, msg := slog.LevelError, "error after the response started"
			if (sw.failed != nil && errors.Is(err, sw.failed)) || r.Context().Err() != nil {
				level, msg = slog.LevelDebug, "client disconnected"
			}
			log.LogAttrs(r.Context(), level, msg,
				slog.String("request_id", RequestID(r.Context())),
				slog.String("method", r.Method),
				slog.String("path", r.URL.Path),
				slog.String("error", err.Error()))
		}
	})
}

// startedWriter records whether the response has started (a final status,
// a body byte or a flush has gone out) and the first error a write or a
// flush returned. It passes Flush and Hijack through.
type startedWriter struct {
	http.ResponseWriter
	started bool
	failed  error // the first write or flush error
}

func (w *startedWriter) WriteHeader(code int) {
	if code >= 200 || code == http.StatusSwitchingProtocols {
		w.started = true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *startedWriter) Write(p []byte) (int, error) {
	w.started = true
	n, err := w.ResponseWriter.Write(p)
	w.fail(err)
	return n, err
}

// Flush sends buffered data to the client.
func (w *startedWriter) Flush() { _ = w.FlushError() }

// FlushError is Flush with its error, for http.ResponseController.
func (w *startedWriter) FlushError() error {
	w.started = true
	err := http.NewResponseController(w.ResponseWriter).Flush()
	w.fail(err)
	return err
}

// Hijack hands the connection over to the handler.
func (w *startedWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		w.started = true
	}
	return conn, rw, err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *startedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *startedWriter) fail(err error) {
	if err != nil && w.failed == nil {
		w.failed = err
	}
}
