// Command baton is the Baton agent engine: one binary that serves the BAE
// client and admin APIs (`serve`, `dev`), applies migrations (`migrate`), and
// talks to a running server (`admin`).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/baton-engine/baton/internal/supervisor"
	"github.com/baton-engine/baton/sandbox"
)

// Exit codes, as BAE's baesrv uses them.
const (
	exitOK      = 0
	exitRuntime = 1
	exitUsage   = 2
)

// exitError carries a process exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErr marks err as a usage or configuration error (exit 2).
func usageErr(err error) error { return &exitError{code: exitUsage, err: err} }

// runtimeErr marks err as a runtime error (exit 1).
func runtimeErr(err error) error { return &exitError{code: exitRuntime, err: err} }

// cli is what every subcommand gets: the process environment and streams,
// injected so tests can run commands in-process.
type cli struct {
	getenv func(string) string
	stdout io.Writer
	stderr io.Writer
	stdin  io.Reader
	// ready, when set, is called by serve/dev once both listeners are bound
	// (tests use it to learn the ports).
	ready func(clientURL, adminURL string)
}

func main() {
	sandbox.Reexec()    // a process-driver sandbox jail runs here, never returning
	supervisor.Reexec() // so does the supervisor of a command (see runChild)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	c := &cli{getenv: os.Getenv, stdout: os.Stdout, stderr: os.Stderr, stdin: os.Stdin}
	code := c.run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// run executes the command line args and returns the exit code.
func (c *cli) run(ctx context.Context, args []string) int {
	root := c.rootCmd()
	root.SetArgs(args)
	root.SetOut(c.stdout)
	root.SetErr(c.stderr)
	root.SetIn(c.stdin)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		fmt.Fprintf(c.stderr, "baton: %v\n", ee.err)
		return ee.code
	}
	// Errors cobra produces itself (unknown command or flag, bad arity)
	// are usage errors.
	fmt.Fprintf(c.stderr, "baton: %v\n", err)
	return exitUsage
}

func (c *cli) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "baton",
		Short:         "Baton hosts durable, multi-client LLM agent sessions",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionString(),
	}
	// `baton` alone, or with only serve flags, runs serve.
	var f serveFlags
	f.register(root.Flags())
	root.Args = cobra.NoArgs
	root.RunE = func(cmd *cobra.Command, _ []string) error {
		return c.serve(cmd.Context(), &f, nil)
	}
	root.Flags().BoolP("version", "V", false, "print the version and exit") // -V as BAE
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(c.versionCmd(), c.serveCmd(), c.devCmd(), c.migrateCmd(), c.chatCmd(), c.executorCmd())
	root.AddCommand(c.adminCmd())
	return root
}
