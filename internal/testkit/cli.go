package testkit

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// cliTimeout bounds one RunCLI.
const cliTimeout = time.Minute

// Getenv looks names up in env; a missing one is "".
func Getenv(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

// RunCLI runs one command line to its end in env, with empty standard
// input, and returns its exit code and output.
func RunCLI(t testing.TB, main Main, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	code = main(ctx, Stdio{Getenv: Getenv(env), Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb}, args)
	return code, out.String(), errb.String()
}

// SyncBuffer is a bytes.Buffer safe for concurrent use, for the output
// of a command running in the background.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
