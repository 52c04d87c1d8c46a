package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx"
	"github.com/baton-engine/baton/wire"
)

// Headers between nodes. A forwarded request names the node it came
// through; an owner that no longer owns the session answers 421 with
// HeaderNotOwner, and the forwarding node looks the owner up again.
const (
	HeaderForwardedBy = "Baton-Forwarded-By"
	HeaderNotOwner    = "Baton-Not-Owner"
)

// maxReplay is the largest request body kept in memory so that a request
// can be sent again to another node when its first target turned out
// not to be the owner. Larger bodies are streamed and sent once.
const maxReplay = 1 << 20

// hopHeaders are the hop-by-hop headers of RFC 9110 §7.6.1, never
// forwarded.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// SessionOf returns the session a client-port request is about, when it
// must be served by the session's owner: every route under
// /api/v1/sessions/{id} except the event log (a read of the shared
// log), and the registered-client and file-view routes under
// /v1/sessions/{id} and /v1/fs/{id}.
func SessionOf(r *http.Request) string {
	p := r.URL.Path
	if rest, ok := strings.CutPrefix(p, "/api/v1/sessions/"); ok {
		id, tail, _ := strings.Cut(rest, "/")
		if tail == "events" && r.Method == http.MethodGet {
			return ""
		}
		return id
	}
	for _, prefix := range []string{"/v1/sessions/", "/v1/fs/"} {
		if rest, ok := strings.CutPrefix(p, prefix); ok {
			id, _, _ := strings.Cut(rest, "/")
			if ses, ok := baton.ParseSessionID(id); ok {
				return ses // the /v1 routes also take the UUID form
			}
			return id
		}
	}
	return ""
}

// Forward wraps the client port's handler: a request about a session this
// node owns (or takes over now) goes to next; one about a session another
// node owns is proxied there and its answer, streams included, relayed.
// While an owner cannot be reached (it stopped, or is handing over) the
// request waits, up to two lease TTLs, for its lease to be released or
// to lapse, and then another node — possibly this one — serves it.
func (n *Node) Forward(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := SessionOf(r)
		if id == "" {
			next.ServeHTTP(w, r)
			return
		}
		if r.Header.Get(HeaderForwardedBy) != "" {
			n.serveForwarded(w, r, next, id)
			return
		}
		n.forward(w, r, next, id)
	})
}

// kind is how forwarding treats a request about a session it does not
// own, read once from the request.
type kind struct {
	anywhere bool // served by any node from the shared log: a plain session.subscribe, session.unsubscribe
	stream   bool // lasts until its client ends it: a calls stream, a subscribe relayed to the owner
}

// kindOf classifies r, whose body (when replayable) is body. A plain
// session.subscribe is fed on any node by rings and the log, so it
// survives the owner's death; one that wants deltas goes to the owner,
// which alone has them. session.unsubscribe ends the feeds of every node
// wherever it is served. Only bodies naming those methods are parsed.
func kindOf(r *http.Request, body []byte) kind {
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/calls") {
		return kind{stream: true}
	}
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/rpc") ||
		!bytes.Contains(body, []byte(`"session.subscribe"`)) && !bytes.Contains(body, []byte(`"session.unsubscribe"`)) {
		return kind{}
	}
	req, perr := wire.Parse(body)
	if perr != nil || req == nil {
		return kind{}
	}
	switch req.Method {
	case "session.subscribe":
		var p struct {
			Deltas bool `json:"stream_deltas"`
		}
		_ = json.Unmarshal(req.Params, &p)
		return kind{anywhere: !p.Deltas, stream: true}
	case "session.unsubscribe":
		return kind{anywhere: true}
	}
	return kind{}
}

// serveForwarded serves a request another node sent here as the owner.
// It is never forwarded again: a node that is not the owner any more
// says so, and the sender looks again.
func (n *Node) serveForwarded(w http.ResponseWriter, r *http.Request, next http.Handler, id string) {
	url, err := n.route(r.Context(), id, false)
	switch {
	case err != nil && err != errDraining:
		n.writeError(w, r, err)
	case url != "" || err == errDraining: // the sender takes it over itself
		notOwner(w, id)
	default:
		release, ok := n.hold(id)
		if !ok { // handed over since: the sender looks again
			notOwner(w, id)
			return
		}
		defer release()
		next.ServeHTTP(w, r)
	}
}

// notOwner turns a forwarded request away: the sender looks for the
// owner again, or takes the session over itself.
func notOwner(w http.ResponseWriter, id string) {
	w.Header().Set(HeaderNotOwner, "1")
	httpx.WriteProblem(w, http.StatusMisdirectedRequest, baton.ECodeUnavailable, "this node does not own session "+id)
}

// forward serves r here or at its owner, retrying while the owner moves.
func (n *Node) forward(w http.ResponseWriter, r *http.Request, next http.Handler, id string) {
	// The common case first: a session this node owns is served as it
	// came, body unread, for one lock.
	if release, ok := n.holdOwned(id); ok {
		defer release()
		next.ServeHTTP(w, r)
		return
	}
	ctx := r.Context()
	body, replayable, err := n.replayable(r)
	if err != nil {
		n.writeError(w, r, baton.Errorf(baton.ECodeBadRequest, "read request body: %v", err))
		return
	}
	var k kind
	if replayable {
		k = kindOf(r, body)
	}
	if k.anywhere {
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
		return
	}
	deadline := time.Now().Add(2*n.ttl + time.Second)
	backoff := 50 * time.Millisecond
	var last error
	for attempt := 0; ; attempt++ {
		url, err := n.route(ctx, id, attempt == 0)
		switch {
		case err == nil && url == "":
			release, ok := n.hold(id)
			if !ok {
				err = errHandedOver
				break // handed over since the route: look again
			}
			defer release()
			if replayable {
				r.Body = io.NopCloser(bytes.NewReader(body))
			}
			next.ServeHTTP(w, r)
			return
		case err == nil:
			var again bool
			again, err = n.proxy(w, r, id, url, body, replayable, k.stream)
			if !again {
				return
			}
			n.forgetRemote(id)
		}
		last = err
		if ctx.Err() != nil {
			return // the client left
		}
		if !time.Now().Add(backoff).Before(deadline) {
			n.log.Warn("forward: no owner in time", "node_id", n.opts.ID, "session_id", id, "err", last)
			n.writeError(w, r, errNoOwner(id, last))
			return
		}
		if err := sleep(ctx, backoff); err != nil {
			return
		}
		backoff = min(2*backoff, n.ttl/4)
	}
}

// replayable reads a small declared body into memory so that it can be
// sent more than once.
func (n *Node) replayable(r *http.Request) ([]byte, bool, error) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil, true, nil
	}
	if r.ContentLength < 0 || r.ContentLength > maxReplay {
		return nil, false, nil
	}
	b := make([]byte, r.ContentLength)
	if _, err := io.ReadFull(r.Body, b); err != nil {
		return nil, false, err
	}
	return b, true, nil
}

// proxy sends r to the owner at base and relays the answer. It reports
// again=true, with the reason, when nothing was relayed and the request
// can be sent again: the owner could not be reached or is not the owner.
func (n *Node) proxy(w http.ResponseWriter, r *http.Request, id, base string, body []byte, replayable, stream bool) (again bool, err error) {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	if node := n.targetNode(id); node != "" {
		if stream {
			defer n.watches.addStream(node, cancel)()
		} else {
			defer n.watches.add(node, cancel)()
		}
	}
	out := r.Clone(ctx)
	out.RequestURI = ""
	out.Host = ""
	target := strings.TrimSuffix(base, "/") + r.URL.RequestURI()
	u, err := r.URL.Parse(target)
	if err != nil {
		return false, err
	}
	out.URL = u
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	out.Header.Set(HeaderForwardedBy, n.opts.ID)
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		if prior := r.Header.Get("X-Forwarded-For"); prior != "" {
			host = prior + ", " + host
		}
		out.Header.Set("X-Forwarded-For", host)
	}
	var sent *countingReader
	switch {
	case replayable && body != nil:
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.ContentLength = int64(len(body))
	case replayable:
		out.Body, out.ContentLength = http.NoBody, 0
	default:
		sent = &countingReader{r: r.Body}
		out.Body = io.NopCloser(sent)
	}
	resp, err := n.rt.RoundTrip(out)
	if err != nil {
		if r.Context().Err() != nil {
			return false, err
		}
		if cause := context.Cause(ctx); cause == errOwnerGone && sent == nil {
			return true, cause // nothing of it was relayed: send it to the next owner
		}
		if sent != nil && sent.n > 0 {
			n.writeError(w, r, baton.Errorf(baton.ECodeUnavailable, "the node owning this session failed while receiving the request; send it again"))
			return false, err
		}
		return true, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusMisdirectedRequest && resp.Header.Get(HeaderNotOwner) != "" {
		if sent == nil || sent.n == 0 {
			return true, errors.New("the node turned the request away: it does not own the session")
		}
	}
	n.relay(w, r, resp)
	return false, nil
}

// relay copies the owner's answer to w, flushing as it goes so that
// NDJSON streams stay live. If the owner's stream breaks (it stopped
// mid-stream), a JSON-RPC stream (/rpc) ends with an error frame the
// client can resume from; any other answer, a registered client's calls
// stream included, is cut, so that the client cannot mistake it for a
// complete one and reconnects.
func (n *Node) relay(w http.ResponseWriter, r *http.Request, resp *http.Response) {
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = v
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	_ = rc.Flush() // a stream's headers reach the client before its first frame
	buf := make([]byte, 32<<10)
	for {
		m, err := resp.Body.Read(buf)
		if m > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(httpx.DefaultWriteTimeout))
			if _, werr := w.Write(buf[:m]); werr != nil {
				return // the client left; closing resp.Body ends the owner's stream
			}
			if err := rc.Flush(); err != nil {
				return
			}
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			if r.Context().Err() != nil {
				return
			}
			n.log.Warn("forward: owner's stream broke", "node_id", n.opts.ID, "path", r.URL.Path, "err", err)
			if isNDJSON(resp.Header.Get("Content-Type")) && strings.HasSuffix(r.URL.Path, "/rpc") {
				frame := wire.ErrorFrame(nil, &wire.Error{Code: wire.CodeServer, Message: ErrOwnerLost})
				_, _ = w.Write(append(frame, '\n'))
				_ = rc.Flush()
				return
			}
			panic(http.ErrAbortHandler)
		}
	}
}

// ErrOwnerLost is the message of the error frame that ends a relayed
// NDJSON stream whose owner stopped mid-stream.
const ErrOwnerLost = "the node serving this session stopped mid-stream; subscribe again with since_event_id set to the last event received"

func isNDJSON(ct string) bool {
	mt, _, _ := mime.ParseMediaType(ct)
	return mt == "application/x-ndjson"
}

// writeError renders err in the error shape of r's API: the /v1 envelope
// under /v1/, RFC 7807 elsewhere.
func (n *Node) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if strings.HasPrefix(r.URL.Path, "/v1/") {
		httpx.WriteV1Error(w, r, n.log, err)
		return
	}
	httpx.WriteError(w, r, n.log, err)
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	m, err := c.r.Read(p)
	c.n += int64(m)
	return m, err
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
