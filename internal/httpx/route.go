package httpx

import "net/http"

// Routes wraps mux so requests it has no route for get BAE's answers: 404
// for an unknown path and 405 for a known path with another method, both
// with an empty body (net/http would write a text body).
func Routes(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern == "" {
			mux.ServeHTTP(bodyless{w}, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// bodyless drops the body and the content headers of net/http's 404 and
// 405 responses.
type bodyless struct{ http.ResponseWriter }

func (w bodyless) WriteHeader(code int) {
	h := w.Header()
	h.Del("Content-Type")
	h.Del("X-Content-Type-Options")
	w.ResponseWriter.WriteHeader(code)
}

func (w bodyless) Write(p []byte) (int, error) { return len(p), nil }
