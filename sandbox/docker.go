package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultDockerSocket is where the Docker Engine API listens by default.
const DefaultDockerSocket = "/var/run/docker.sock"

// Docker talks to a Docker Engine over its unix socket with a small
// hand-written client of the Engine API.
type Docker struct {
	socket string
	hc     *http.Client
}

// NewDocker returns a client for the engine at socket (DefaultDockerSocket
// when empty).
func NewDocker(socket string) *Docker {
	if socket == "" {
		socket = DefaultDockerSocket
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConns:    4,
		IdleConnTimeout: 30 * time.Second,
	}
	return &Docker{socket: socket, hc: &http.Client{Transport: tr}}
}

// EnsureImage inspects image and pulls it when the engine does not have it.
func (d *Docker) EnsureImage(ctx context.Context, image string) error {
	status, body, err := d.do(ctx, http.MethodGet, "/images/"+url.PathEscape(image)+"/json", nil)
	if err != nil {
		return err
	}
	switch status {
	case http.StatusOK:
		return nil
	case http.StatusNotFound:
	default:
		return fmt.Errorf("sandbox image %q error: %s", image, engineMessage(body))
	}
	ref, tag := splitTag(image)
	q := url.Values{"fromImage": {ref}, "tag": {tag}}
	status, body, err = d.do(ctx, http.MethodPost, "/images/create?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("sandbox image %q error: %s", image, engineMessage(body))
	}
	// A pull streams JSON progress objects; a failure arrives as one with
	// an "error" field even though the status was 200.
	dec := json.NewDecoder(strings.NewReader(string(body)))
	for {
		var msg struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&msg); err != nil {
			break
		}
		if msg.Error != "" {
			return fmt.Errorf("sandbox image %q error: %s", image, msg.Error)
		}
	}
	return nil
}

func (d *Docker) do(ctx context.Context, method, path string, body io.Reader) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://docker"+path, body)
	if err != nil {
		return 0, nil, err
	}
	resp, err := d.hc.Do(req)
	if err != nil {
		var ne *net.OpError
		if errors.As(err, &ne) {
			return 0, nil, fmt.Errorf("docker engine not reachable at %s: %v", d.socket, ne.Err)
		}
		return 0, nil, fmt.Errorf("docker engine: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, b, err
}

// engineMessage extracts {"message": …} from an Engine API error body.
func engineMessage(body []byte) string {
	var m struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &m) == nil && m.Message != "" {
		return m.Message
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 1024 {
		s = s[:1024] + "…"
	}
	return s
}

// splitTag splits "name:tag" (keeping registry ports intact) and defaults
// the tag to latest.
func splitTag(image string) (string, string) {
	if i := strings.LastIndexByte(image, ':'); i > strings.LastIndexByte(image, '/') {
		return image[:i], image[i+1:]
	}
	return image, "latest"
}
