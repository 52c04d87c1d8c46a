package sandbox

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/sandbox/sandboxtest"
)

// fakeShell scripts the commands the shared tests run, the way sh in an
// alpine container answers them.
func fakeShell(cmd []string) sandboxtest.Script {
	switch cmd[len(cmd)-1] {
	case "echo hi":
		return sandboxtest.Script{Frames: []sandboxtest.Frame{{Stream: 1, Data: "hi\n"}}}
	case "echo a; echo b >&2; echo c; exit 3":
		return sandboxtest.Script{Frames: []sandboxtest.Frame{{Stream: 1, Data: "a\n"}, {Stream: 2, Data: "b\n"}, {Stream: 1, Data: "c\n"}}, ExitCode: 3}
	case "yes | head -c 5000":
		var fs []sandboxtest.Frame
		for i := 0; i < 5; i++ {
			fs = append(fs, sandboxtest.Frame{Stream: 1, Data: strings.Repeat("y\n", 500)})
		}
		return sandboxtest.Script{Frames: fs, Chunk: 700}
	case "sleep 30":
		return sandboxtest.Script{Block: true}
	}
	return sandboxtest.Script{Frames: []sandboxtest.Frame{{Stream: 2, Data: "sh: unknown\n"}}, ExitCode: 127}
}

// onEngines runs fn against a fake engine and, when one answers at the
// default socket, against a real Docker engine (fake is nil there).
func onEngines(t *testing.T, fn func(t *testing.T, d *Docker, fake *sandboxtest.Engine)) {
	t.Run("fake", func(t *testing.T) {
		e := &sandboxtest.Engine{Images: []string{"alpine:3"}, Exec: fakeShell}
		fn(t, NewDocker(e.Start(t)), e)
	})
	t.Run("real", func(t *testing.T) {
		if err := ping(DefaultDockerSocket); err != nil {
			t.Skipf("no Docker engine answers at %s: %v", DefaultDockerSocket, err)
		}
		d := NewDocker(DefaultDockerSocket)
		d.Instance = fmt.Sprintf("test-%d", time.Now().UnixNano())
		t.Cleanup(func() { d.Cleanup(context.Background()) })
		if err := d.EnsureImage(context.Background(), "alpine:3"); err != nil {
			t.Skipf("real engine cannot provide alpine:3: %v", err)
		}
		fn(t, d, nil)
	})
}

func ping(socket string) error {
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
	resp, err := c.Get("http://docker/_ping")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("_ping: %s", resp.Status)
	}
	return nil
}

func TestDockerLifecycle(t *testing.T) {
	onEngines(t, func(t *testing.T, d *Docker, fake *sandboxtest.Engine) {
		ctx := context.Background()
		d.OutputCap = 1000
		id, err := d.Start(ctx, "alpine:3")
		if err != nil {
			t.Fatal(err)
		}
		if fake != nil {
			var create struct {
				Image      string
				Cmd        []string
				Labels     map[string]string
				HostConfig map[string]any
			}
			for _, r := range fake.Requests() {
				if r.Path == "/containers/create" {
					json.Unmarshal([]byte(r.Body), &create)
					if r.Version != "/v1.43" {
						t.Errorf("create on version %q, want /v1.43 (engine speaks 1.45)", r.Version)
					}
				}
			}
			want := map[string]string{LabelSandbox: "1"}
			if create.Image != "alpine:3" || !cmp.Equal(create.Cmd, []string{"sleep", "infinity"}) ||
				!cmp.Equal(create.Labels, want) || create.HostConfig["AutoRemove"] != true {
				t.Errorf("create body %+v", create)
			}
			if cs := fake.Containers(); len(cs) != 1 || cs[0].ID != id || !cs[0].Running {
				t.Errorf("containers after start %+v", cs)
			}
		}
		tests := []struct {
			cmd  string
			want baton.ExecResult
		}{
			{"echo hi", baton.ExecResult{Stdout: "hi\n"}},
			{"echo a; echo b >&2; echo c; exit 3", baton.ExecResult{Stdout: "a\nc\n", Stderr: "b\n", ExitCode: 3}},
			// Cut at the driver's cap, the kept lines make room for a note.
			{"yes | head -c 5000", baton.ExecResult{Stdout: strings.Repeat("y\n", 482) + "[output truncated: 4036 more bytes]", Truncated: true}},
		}
		for _, tc := range tests {
			got, err := d.Exec(ctx, id, tc.cmd, baton.ExecOptions{})
			if err != nil {
				t.Fatalf("%s: %v", tc.cmd, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.cmd, diff)
			}
		}
		if fake != nil {
			var execBody map[string]any
			for _, r := range fake.Requests() {
				if strings.HasSuffix(r.Path, "/exec") {
					json.Unmarshal([]byte(r.Body), &execBody)
					break
				}
			}
			wantBody := map[string]any{"Cmd": []any{"sh", "-c", "echo hi"}, "AttachStdout": true, "AttachStderr": true}
			if diff := cmp.Diff(wantBody, execBody); diff != "" {
				t.Errorf("exec create body (-want +got):\n%s", diff)
			}
		}

		for i := 0; i < 2; i++ { // idempotent
			if err := d.Stop(ctx, id); err != nil {
				t.Fatalf("stop %d: %v", i, err)
			}
		}
		if fake != nil && len(fake.Containers()) != 0 {
			t.Errorf("containers after stop %+v", fake.Containers())
		}
		if _, err := d.Exec(ctx, id, "echo hi", baton.ExecOptions{}); err == nil || !strings.HasPrefix(err.Error(), `sandbox runtime error: docker exec "`+id+`" failed: `) {
			t.Errorf("exec after stop: %v", err)
		}
	})
}

func TestDockerExecCancel(t *testing.T) {
	onEngines(t, func(t *testing.T, d *Docker, fake *sandboxtest.Engine) {
		id, err := d.Start(context.Background(), "alpine:3")
		if err != nil {
			t.Fatal(err)
		}
		defer d.Stop(context.Background(), id)
		ctx, cancel := context.WithCancel(context.Background())
		if fake != nil {
			started := make(chan struct{})
			fake.Exec = func(cmd []string) sandboxtest.Script {
				close(started)
				return fakeShell(cmd)
			}
			go func() { <-started; cancel() }()
		} else {
			ctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
		}
		defer cancel()
		_, err = d.Exec(ctx, id, "sleep 30", baton.ExecOptions{})
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want the context's", err)
		}
	})
}

func TestDockerCleanup(t *testing.T) {
	onEngines(t, func(t *testing.T, d *Docker, fake *sandboxtest.Engine) {
		ctx := context.Background()
		if d.Instance == "" {
			d.Instance = "i1"
		}
		var keep []string
		if fake != nil {
			fake.Add(sandboxtest.Container{ID: "other-instance", Labels: map[string]string{LabelSandbox: "1", LabelInstance: "i2"}, Running: true})
			fake.Add(sandboxtest.Container{ID: "unlabelled", Running: true})
			fake.Add(sandboxtest.Container{ID: "stopped-mine", Labels: map[string]string{LabelSandbox: "1", LabelInstance: "i1"}})
			keep = []string{"other-instance", "unlabelled"}
		}
		for i := 0; i < 2; i++ {
			if _, err := d.Start(ctx, "alpine:3"); err != nil {
				t.Fatal(err)
			}
		}
		n, err := d.Cleanup(ctx)
		want := 2
		if fake != nil {
			want = 3
		}
		if err != nil || n != want {
			t.Fatalf("Cleanup = %d, %v; want %d", n, err, want)
		}
		if fake != nil {
			var got []string
			for _, c := range fake.Containers() {
				got = append(got, c.ID)
			}
			if diff := cmp.Diff(keep, got); diff != "" {
				t.Errorf("left (-want +got):\n%s", diff)
			}
		}
		if n, err := d.Cleanup(ctx); n != 0 || err != nil {
			t.Errorf("second Cleanup = %d, %v", n, err)
		}
	})
}

func TestDockerStartFails(t *testing.T) {
	e := &sandboxtest.Engine{}
	d := NewDocker(e.Start(t))
	_, err := d.Start(context.Background(), "nope:1")
	want := `sandbox runtime error: docker run "nope:1" failed: No such image: nope:1`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %s", err, want)
	}
	d = NewDocker(t.TempDir() + "/none.sock")
	if _, err := d.Start(context.Background(), "x"); err == nil || !strings.Contains(err.Error(), "docker engine not reachable") {
		t.Fatalf("unreachable: %v", err)
	}
}

func TestDockerVersionNegotiation(t *testing.T) {
	e := &sandboxtest.Engine{APIVersion: "1.41", Images: []string{"alpine:3"}}
	d := NewDocker(e.Start(t))
	ctx := context.Background()
	id, err := d.Start(ctx, "alpine:3")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Exec(ctx, id, "echo hi", baton.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	versions := 0
	for _, r := range e.Requests() {
		switch {
		case r.Path == "/version":
			versions++
		case r.Version != "/v1.41":
			t.Errorf("%s %s on %q, want /v1.41", r.Method, r.Path, r.Version)
		}
	}
	if versions != 1 {
		t.Errorf("%d /version requests, want 1", versions)
	}

	old := &sandboxtest.Engine{APIVersion: "1.24"}
	_, err = NewDocker(old.Start(t)).Start(ctx, "alpine:3")
	if err == nil || !strings.Contains(err.Error(), "speaks API 1.24; at least 1.25 is needed") {
		t.Fatalf("old engine: %v", err)
	}
}

func TestDockerExecUnknownContainer(t *testing.T) {
	e := &sandboxtest.Engine{}
	d := NewDocker(e.Start(t))
	_, err := d.Exec(context.Background(), "gone", "true", baton.ExecOptions{})
	want := `sandbox runtime error: docker exec "gone" failed: No such container: gone`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v", err)
	}
	if err := d.Stop(context.Background(), "gone"); err != nil {
		t.Fatalf("stop unknown: %v", err)
	}
}

// mux encodes frames the way the engine does.
func mux(frames ...sandboxtest.Frame) []byte {
	var b []byte
	for _, f := range frames {
		var hdr [8]byte
		hdr[0] = f.Stream
		binary.BigEndian.PutUint32(hdr[4:], uint32(len(f.Data)))
		b = append(append(b, hdr[:]...), f.Data...)
	}
	return b
}

func TestDemux(t *testing.T) {
	stream := mux(sandboxtest.Frame{Stream: 1, Data: "out1 "}, sandboxtest.Frame{Stream: 2, Data: "err1"},
		sandboxtest.Frame{Stream: 1, Data: ""}, sandboxtest.Frame{Stream: 0, Data: "out2"})
	var out, errb bytes.Buffer
	if err := Demux(iotest.OneByteReader(bytes.NewReader(stream)), &out, &errb); err != nil {
		t.Fatal(err)
	}
	if out.String() != "out1 out2" || errb.String() != "err1" {
		t.Fatalf("stdout %q stderr %q", out.String(), errb.String())
	}
	bad := []struct {
		name string
		in   []byte
		want string
	}{
		{"short header", stream[:5], "read stream header: unexpected EOF"},
		{"short payload", stream[:10], "read stream: unexpected EOF"},
		{"bad type", mux(sandboxtest.Frame{Stream: 7, Data: "x"}), "bad stream type 7"},
		{"engine error", mux(sandboxtest.Frame{Stream: 3, Data: "oci runtime failed"}), "engine error: oci runtime failed"},
	}
	for _, tc := range bad {
		err := Demux(bytes.NewReader(tc.in), &out, &errb)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: err = %v, want %s", tc.name, err, tc.want)
		}
	}
}

func FuzzDemux(f *testing.F) {
	f.Add(mux(sandboxtest.Frame{Stream: 1, Data: "hello"}, sandboxtest.Frame{Stream: 2, Data: "world"}))
	f.Add([]byte{1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 'x'})
	f.Add([]byte{3, 0, 0, 0, 0, 0, 0, 2, 'n', 'o'})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		var out, errb bytes.Buffer
		err := Demux(bytes.NewReader(in), &out, &errb)
		if out.Len()+errb.Len() > len(in) {
			t.Fatalf("wrote %d bytes from %d input", out.Len()+errb.Len(), len(in))
		}
		if err != nil {
			return
		}
		// A stream that decodes cleanly re-encodes to an equal-length one
		// (frame boundaries aside), and decodes the same one byte a read.
		var out2, errb2 bytes.Buffer
		if err := Demux(iotest.OneByteReader(bytes.NewReader(in)), &out2, &errb2); err != nil {
			t.Fatalf("one-byte reads failed: %v", err)
		}
		if out.String() != out2.String() || errb.String() != errb2.String() {
			t.Fatal("one-byte reads decoded differently")
		}
	})
}
