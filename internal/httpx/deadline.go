package httpx

import (
	"errors"
	"io"
	"net/http"
	"os"
	"sync"
	"time"
)

// Default deadlines of a request body read and of one streaming write.
const (
	DefaultBodyTimeout  = 60 * time.Second
	DefaultWriteTimeout = 60 * time.Second
)

// BodyDeadline gives every request body d (DefaultBodyTimeout when <= 0),
// from the start of the request, to arrive whole: a client that announces
// a body and then stalls gets a read error (BodyError maps it to 408)
// instead of holding its connection forever. The connection's read
// deadline is lifted as soon as the body ends (EOF or Close), so a
// streaming response after the body is unaffected: a timeout in
// net/http's background read, which watches for the client going away,
// would cancel the request. (net/http also lifts it when it starts that
// read; this does not depend on it.) A body the handler leaves unread keeps the deadline, which
// then bounds net/http's discarding of the rest. Requests without a body
// are passed through untouched.
func BodyDeadline(d time.Duration, h http.Handler) http.Handler {
	if d <= 0 {
		d = DefaultBodyTimeout
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		// A writer without deadlines (a test recorder) reads without one.
		if rc.SetReadDeadline(time.Now().Add(d)) == nil {
			r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
		}
		h.ServeHTTP(w, r)
	})
}

// deadlineBody is a request body read under a connection read deadline,
// which it lifts when the body ends.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	once sync.Once
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.clear()
	}
	// After a timeout the passed deadline stays, so that whatever reads
	// the rest (net/http discarding it) fails at once too.
	return n, err
}

func (b *deadlineBody) Close() error {
	err := b.ReadCloser.Close()
	b.clear()
	return err
}

// clear lifts the deadline, once.
func (b *deadlineBody) clear() {
	b.once.Do(func() { _ = b.rc.SetReadDeadline(time.Time{}) })
}

// BodyError is the rejection for a failed request body read: 408 when
// the body deadline passed, else 400.
func BodyError(err error) *Rejection {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return &Rejection{Status: http.StatusRequestTimeout, Text: "Timed out reading the request body"}
	}
	return &Rejection{Status: http.StatusBadRequest, Text: "Failed to buffer the request body: " + err.Error()}
}
