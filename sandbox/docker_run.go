package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/baton-engine/baton"
)

var _ baton.SandboxDriver = (*Docker)(nil)

// Start creates and starts a long-lived container of image running
// `sleep infinity`, removed by the engine once stopped (BAE's
// `docker run -d --rm <img> sleep infinity`), and returns its id.
func (d *Docker) Start(ctx context.Context, image string) (string, error) {
	fail := func(detail string) error {
		return fmt.Errorf("sandbox runtime error: docker run %q failed: %s", image, detail)
	}
	labels := map[string]string{LabelSandbox: "1"}
	if d.Instance != "" {
		labels[LabelInstance] = d.Instance
	}
	body := map[string]any{
		"Image":      image,
		"Cmd":        []string{"sleep", "infinity"},
		"Labels":     labels,
		"HostConfig": map[string]any{"AutoRemove": true},
	}
	status, b, err := d.do(ctx, http.MethodPost, "/containers/create", body)
	if err != nil {
		return "", fail(err.Error())
	}
	var created struct {
		ID string `json:"Id"`
	}
	if status != http.StatusCreated || json.Unmarshal(b, &created) != nil || created.ID == "" {
		return "", fail(engineMessage(b))
	}
	status, b, err = d.do(ctx, http.MethodPost, "/containers/"+url.PathEscape(created.ID)+"/start", nil)
	if err == nil && status != http.StatusNoContent && status != http.StatusNotModified {
		err = errors.New(engineMessage(b))
	}
	if err != nil {
		// Do not leave the created container behind.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = d.remove(rctx, created.ID)
		return "", fail(err.Error())
	}
	return created.ID, nil
}

// Stop stops the container (5 s grace) and removes it. A container that
// is already stopped, gone, or being removed is not an error.
func (d *Docker) Stop(ctx context.Context, id string) error {
	status, b, err := d.do(ctx, http.MethodPost, "/containers/"+url.PathEscape(id)+"/stop?t=5", nil)
	if err != nil {
		return fmt.Errorf("sandbox runtime error: docker stop %q failed: %v", id, err)
	}
	switch status {
	case http.StatusNoContent, http.StatusNotModified, http.StatusNotFound:
	default:
		return fmt.Errorf("sandbox runtime error: docker stop %q failed: %s", id, engineMessage(b))
	}
	if err := d.remove(ctx, id); err != nil {
		return fmt.Errorf("sandbox runtime error: docker rm %q failed: %v", id, err)
	}
	return nil
}

// remove force-removes a container; gone or removal in progress is fine.
func (d *Docker) remove(ctx context.Context, id string) error {
	status, b, err := d.do(ctx, http.MethodDelete, "/containers/"+url.PathEscape(id)+"?force=1", nil)
	if err != nil {
		return err
	}
	switch status {
	case http.StatusNoContent, http.StatusOK, http.StatusNotFound, http.StatusConflict:
		return nil
	}
	return errors.New(engineMessage(b))
}

// Cleanup removes every sandbox container of this server (label
// dev.baton.sandbox=1, and dev.baton.instance when Instance is set),
// running or not, and returns how many it removed. Run at start it
// recovers from a crash; at shutdown it leaves nothing behind.
func (d *Docker) Cleanup(ctx context.Context) (int, error) {
	filter := []string{LabelSandbox + "=1"}
	if d.Instance != "" {
		filter = append(filter, LabelInstance+"="+d.Instance)
	}
	f, _ := json.Marshal(map[string][]string{"label": filter})
	q := url.Values{"all": {"1"}, "filters": {string(f)}}
	status, b, err := d.do(ctx, http.MethodGet, "/containers/json?"+q.Encode(), nil)
	if err != nil {
		return 0, err
	}
	var list []struct {
		ID string `json:"Id"`
	}
	if status != http.StatusOK || json.Unmarshal(b, &list) != nil {
		return 0, fmt.Errorf("docker list sandboxes: %s", engineMessage(b))
	}
	var errs []error
	n := 0
	for _, c := range list {
		if err := d.remove(ctx, c.ID); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", c.ID, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// Exec runs `sh -c command` in the container and collects its output,
// each stream capped at opt.Limit or OutputCap (the excess is dropped and
// the result marked truncated; under OutputCap the cut stream ends with a
// note, see outputBuffers). opt.Stdin, when set, is written to the
// command's standard input over a hijacked connection, which is then
// half-closed. A non-zero exit is a result; ctx cancellation aborts.
func (d *Docker) Exec(ctx context.Context, id, command string, opt baton.ExecOptions) (baton.ExecResult, error) {
	fail := func(detail string) (baton.ExecResult, error) {
		if ctx.Err() != nil {
			return baton.ExecResult{}, ctx.Err()
		}
		return baton.ExecResult{}, fmt.Errorf("sandbox runtime error: docker exec %q failed: %s", id, detail)
	}
	create := map[string]any{"Cmd": []string{"sh", "-c", command}, "AttachStdout": true, "AttachStderr": true}
	if opt.Stdin != nil {
		create["AttachStdin"] = true
	}
	status, b, err := d.do(ctx, http.MethodPost, "/containers/"+url.PathEscape(id)+"/exec", create)
	if err != nil {
		return fail(err.Error())
	}
	var created struct {
		ID string `json:"Id"`
	}
	if status != http.StatusCreated || json.Unmarshal(b, &created) != nil || created.ID == "" {
		return fail(engineMessage(b))
	}
	execPath := "/exec/" + url.PathEscape(created.ID)
	start := map[string]any{"Detach": false, "Tty": false}
	stdout, stderr := outputBuffers(opt.Limit, d.OutputCap)
	if opt.Stdin != nil {
		err = d.attach(ctx, execPath+"/start", start, opt.Stdin, stdout, stderr)
	} else {
		err = d.output(ctx, execPath+"/start", start, stdout, stderr)
	}
	if ctx.Err() != nil {
		return baton.ExecResult{}, ctx.Err()
	}
	if err != nil {
		return fail(err.Error())
	}
	code, err := d.exitCode(ctx, execPath)
	if err != nil {
		return fail(err.Error())
	}
	return execResult(stdout, stderr, code), nil
}

// output starts an exec without input and demultiplexes its output
// stream.
func (d *Docker) output(ctx context.Context, path string, body any, stdout, stderr io.Writer) error {
	resp, err := d.stream(ctx, http.MethodPost, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return errors.New(engineMessage(b))
	}
	return Demux(resp.Body, stdout, stderr)
}

// attach starts an exec the Engine API's interactive way: the request
// asks to upgrade the connection (101 Switching Protocols), after which
// the connection carries stdin up — written here, then half-closed so the
// command sees its end — and the multiplexed output down.
func (d *Docker) attach(ctx context.Context, path string, body any, stdin []byte, stdout, stderr io.Writer) error {
	prefix, err := d.apiPrefix(ctx)
	if err != nil {
		return err
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "unix", d.socket)
	if err != nil {
		return fmt.Errorf("docker engine not reachable at %s: %v", d.socket, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	req, err := http.NewRequest(http.MethodPost, "http://docker"+prefix+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "tcp")
	if err := req.Write(conn); err != nil {
		return fmt.Errorf("docker engine: %w", err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return fmt.Errorf("docker engine: %w", err)
	}
	var out io.Reader = br // a 101 response has no body: the stream follows it
	switch resp.StatusCode {
	case http.StatusSwitchingProtocols:
	case http.StatusOK: // an engine that streams without upgrading
		out = resp.Body
	default:
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return errors.New(engineMessage(msg))
	}
	// Input goes up while output comes down, so a command that writes
	// before it has read everything cannot deadlock the two.
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		if _, err := conn.Write(stdin); err == nil {
			if hc, ok := conn.(interface{ CloseWrite() error }); ok {
				hc.CloseWrite()
			}
		}
		// A command that exits without reading all its input ends the
		// stream; the write error that follows is not the exec's.
	}()
	err = Demux(out, stdout, stderr)
	conn.Close() // ends a write the command never read
	<-wrote
	return err
}

// exitCode inspects a finished exec. The engine may report it running for
// a moment after its stream ended, so a running exec is asked again.
func (d *Docker) exitCode(ctx context.Context, execPath string) (int, error) {
	wait := time.Millisecond
	for tries := 0; ; tries++ {
		status, b, err := d.do(ctx, http.MethodGet, execPath+"/json", nil)
		if err != nil {
			return 0, err
		}
		var st struct {
			Running  bool `json:"Running"`
			ExitCode *int `json:"ExitCode"`
		}
		if status != http.StatusOK || json.Unmarshal(b, &st) != nil {
			return 0, errors.New(engineMessage(b))
		}
		if !st.Running && st.ExitCode != nil {
			return *st.ExitCode, nil
		}
		if tries == 20 {
			return -1, nil // never reported an exit: treat as killed
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// Demux copies a multiplexed Engine API stream — frames of an 8-byte
// header (stream type; three zero bytes; big-endian uint32 length) and
// payload — to stdout (types 0 and 1) and stderr (type 2). A type-3 frame
// carries an engine error, returned as such. It returns nil at a clean
// end of stream between frames.
func Demux(r io.Reader, stdout, stderr io.Writer) error {
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if err == io.EOF {
				return nil
			}
			return fmt.Errorf("read stream header: %w", err)
		}
		n := int64(binary.BigEndian.Uint32(hdr[4:]))
		var w io.Writer
		switch hdr[0] {
		case 0, 1:
			w = stdout
		case 2:
			w = stderr
		case 3:
			msg, err := io.ReadAll(io.LimitReader(r, min(n, 4096)))
			if err != nil {
				return fmt.Errorf("read stream: %w", err)
			}
			return fmt.Errorf("engine error: %s", msg)
		default:
			return fmt.Errorf("bad stream type %d", hdr[0])
		}
		if _, err := io.CopyN(w, r, n); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("read stream: %w", err)
		}
	}
}
