package sandbox

import (
	"context"
	"log/slog"
	"time"
)

// Defaults of the process driver's limits.
const (
	// DefaultPids caps the processes (and threads) of one sandbox.
	DefaultPids = 256
	// DefaultMemory caps the memory of one sandbox, in bytes.
	DefaultMemory = 512 << 20
	// DefaultExecTimeout bounds one exec; the command is killed after it.
	DefaultExecTimeout = 10 * time.Minute
	// DefaultHostUID is the first host uid and gid that root of a sandbox's
	// user namespace maps to; the mapping covers 65536 ids.
	DefaultHostUID = 1_000_000
)

// ProcessOptions configures the process driver.
type ProcessOptions struct {
	// RootfsDir holds one root filesystem directory per image, named as
	// the image.
	RootfsDir string
	// StateDir holds one directory per running sandbox: its writable /tmp
	// and /work. Everything in it belongs to the driver.
	StateDir string
	// Instance names this server's cgroups so that Cleanup leaves other
	// servers' sandboxes alone; empty means a digest of StateDir.
	Instance string
	// Pids caps the processes of one sandbox (DefaultPids when 0).
	Pids int
	// Memory caps the memory of one sandbox in bytes (DefaultMemory when 0).
	Memory int64
	// Timeout bounds one exec (DefaultExecTimeout when 0).
	Timeout time.Duration
	// OutputCap bounds each output stream of an exec when the exec sets no
	// limit, a cut noted in the stream; 0 means DefaultOutputCap.
	OutputCap int
	// HostUID is the first host uid/gid of the user namespace mapping
	// (DefaultHostUID when 0).
	HostUID uint32
	// NoUserNS runs sandboxes without a user namespace (as root with a
	// reduced capability set). Without it the driver still falls back to
	// that, with a warning, where the kernel refuses user namespaces.
	NoUserNS bool
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger
}

// Cleaner removes what a driver's sandboxes left behind.
type Cleaner interface {
	// Cleanup removes every sandbox of this server, running or left by an
	// earlier run, and returns how many it removed.
	Cleanup(ctx context.Context) (int, error)
}

var (
	_ Cleaner = (*Docker)(nil)
	_ Cleaner = (*Process)(nil)
)
