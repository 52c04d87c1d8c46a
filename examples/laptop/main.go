// Command laptop attaches this machine to a session someone else drives:
// it registers as a session client exposing two tools, list_files and
// read_file, confined to one directory, and serves their calls until
// interrupted. The model sees them as client__{name}__list_files and
// client__{name}__read_file.
//
//	laptop -url http://127.0.0.1:8080 -session ses_… -key bae_ses_… -dir ~/notes
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/baton-engine/baton/client"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8080", "Baton client port")
	session := flag.String("session", "", "session id (ses_… or UUID form)")
	key := flag.String("key", os.Getenv("BATON_KEY"), "session key, or a client key with session.manage (default $BATON_KEY)")
	dir := flag.String("dir", ".", "the directory the tools may read")
	name := flag.String("name", "laptop", "client name the model sees")
	flag.Parse()
	if err := run(*url, *session, *key, *dir, *name); err != nil {
		fmt.Fprintln(os.Stderr, "laptop:", err)
		os.Exit(1)
	}
}

func run(url, session, key, dir, name string) error {
	if session == "" || key == "" {
		return errors.New("-session and -key are required")
	}
	root, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	c, err := client.RegisterClient(ctx, client.Config{BaseURL: url, Logger: log}, session, key, name,
		client.TTL(30*time.Second), listFiles(root), readFile(root))
	if err != nil {
		return err
	}
	log.Info("registered", "name", c.Name, "id", c.ID, "dir", root)
	select {
	case <-ctx.Done():
	case <-c.Done():
		return c.Err()
	}
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.Close(cctx)
}

// inside resolves rel under root and refuses paths that leave it.
func inside(root, rel string) (string, error) {
	p := filepath.Join(root, filepath.Clean("/"+rel))
	if p != root && !strings.HasPrefix(p, root+string(filepath.Separator)) {
		return "", fmt.Errorf("%q is outside the shared directory", rel)
	}
	return p, nil
}

type pathInput struct {
	Path string `json:"path"`
}

func listFiles(root string) client.RegisteredTool {
	return client.RegisteredTool{
		Name:        "list_files",
		Description: "List the entries of a directory in the user's shared folder. path is relative to it; empty means the folder itself.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`),
		Handler: func(_ context.Context, in json.RawMessage) (any, error) {
			var p pathInput
			_ = json.Unmarshal(in, &p)
			dir, err := inside(root, p.Path)
			if err != nil {
				return nil, err
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				return nil, err
			}
			var b strings.Builder
			for _, e := range entries {
				b.WriteString(e.Name())
				if e.IsDir() {
					b.WriteByte('/')
				}
				b.WriteByte('\n')
			}
			return b.String(), nil
		},
	}
}

// maxRead caps how much of a file read_file returns.
const maxRead = 256 << 10

func readFile(root string) client.RegisteredTool {
	return client.RegisteredTool{
		Name:        "read_file",
		Description: "Read a text file from the user's shared folder (first 256 KiB). path is relative to it.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
		Handler: func(_ context.Context, in json.RawMessage) (any, error) {
			var p pathInput
			_ = json.Unmarshal(in, &p)
			file, err := inside(root, p.Path)
			if err != nil {
				return nil, err
			}
			f, err := os.Open(file)
			if err != nil {
				return nil, err
			}
			defer f.Close()
			b, err := io.ReadAll(io.LimitReader(f, maxRead))
			if err != nil {
				return nil, err
			}
			return string(b), nil
		},
	}
}
