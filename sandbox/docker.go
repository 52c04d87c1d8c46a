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
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultDockerSocket is where the Docker Engine API listens by default.
const DefaultDockerSocket = "/var/run/docker.sock"

// Engine API versions: the newest this client speaks, and the oldest it
// accepts (AutoRemove in HostConfig needs 1.25).
const (
	maxAPIVersion = "1.43"
	minAPIVersion = "1.25"
)

// Container labels: every sandbox carries LabelSandbox=1, and
// LabelInstance=<Docker.Instance> when set, so Cleanup finds them.
const (
	LabelSandbox  = "dev.baton.sandbox"
	LabelInstance = "dev.baton.instance"
)

// DefaultOutputCap bounds each of stdout and stderr of one exec.
const DefaultOutputCap = 1 << 20

// Docker talks to a Docker Engine over its unix socket with a small
// hand-written client of the Engine API. It implements baton.SandboxDriver.
type Docker struct {
	// Instance, when set before first use, labels this server's containers
	// so that Cleanup leaves other servers' sandboxes on a shared engine
	// alone.
	Instance string
	// OutputCap bounds each output stream of an exec that sets no limit,
	// a cut noted in the stream; 0 means DefaultOutputCap. Set before
	// first use.
	OutputCap int

	socket string
	hc     *http.Client

	mu      sync.Mutex
	version string // negotiated "/v1.xx" prefix; "" until known
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

// apiPrefix negotiates the API version once: the lower of the engine's and
// maxAPIVersion. A failure is not remembered, so an engine that comes up
// later is negotiated with then.
func (d *Docker) apiPrefix(ctx context.Context) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.version != "" {
		return d.version, nil
	}
	resp, err := d.send(ctx, http.MethodGet, "/version", nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var v struct {
		APIVersion string `json:"ApiVersion"`
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &v) != nil || v.APIVersion == "" {
		return "", fmt.Errorf("docker engine at %s: version query failed: %s", d.socket, engineMessage(b))
	}
	ver := v.APIVersion
	if versionLess(ver, minAPIVersion) {
		return "", fmt.Errorf("docker engine at %s speaks API %s; at least %s is needed", d.socket, ver, minAPIVersion)
	}
	if versionLess(maxAPIVersion, ver) {
		ver = maxAPIVersion
	}
	d.version = "/v" + ver
	return d.version, nil
}

// versionLess compares "major.minor" API versions numerically.
func versionLess(a, b string) bool {
	pa, pb := strings.SplitN(a, ".", 2), strings.SplitN(b, ".", 2)
	for i := 0; i < 2; i++ {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

// send issues one request on a raw (unversioned) path.
func (d *Docker) send(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = strings.NewReader(string(b))
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://docker"+path, r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := d.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var ne *net.OpError
		if errors.As(err, &ne) {
			return nil, fmt.Errorf("docker engine not reachable at %s: %v", d.socket, ne.Err)
		}
		return nil, fmt.Errorf("docker engine: %w", err)
	}
	return resp, nil
}

// stream issues a request on a versioned path and returns the open
// response.
func (d *Docker) stream(ctx context.Context, method, path string, body any) (*http.Response, error) {
	prefix, err := d.apiPrefix(ctx)
	if err != nil {
		return nil, err
	}
	return d.send(ctx, method, prefix+path, body)
}

// do issues a request on a versioned path and reads the whole response.
func (d *Docker) do(ctx context.Context, method, path string, body any) (int, []byte, error) {
	resp, err := d.stream(ctx, method, path, body)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	return resp.StatusCode, b, err
}

// engineMessage extracts {"message": …} from an Engine API error body,
// trimmed to 1024 characters as BAE trims a CLI's stderr.
func engineMessage(body []byte) string {
	var m struct {
		Message string `json:"message"`
	}
	s := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &m) == nil && m.Message != "" {
		s = strings.TrimSpace(m.Message)
	}
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
