package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/filearea"
)

var _ filearea.Store = (*DB)(nil)

// Session files live in session_files, one row per file keyed by (session,
// path) with the content in the row. Directories are implicit, so the
// writes check the tree's shape: no file below a file, no file where a
// directory is. The session's row is locked (on PostgreSQL) for the
// length of a write, so that concurrent writes of one session on several
// nodes see each other's files when they check the shape and the quota.

const fileCols = `path, size, sha256, updated_at`

func scanFile(s scanner) (*filearea.File, error) {
	var (
		f       filearea.File
		updated string
	)
	if err := s.Scan(&f.Path, &f.Size, &f.SHA256, &updated); err != nil {
		return nil, err
	}
	t, err := parseTime(updated)
	f.UpdatedAt = t
	return &f, err
}

func errTooLarge(format string, args ...any) error {
	return baton.Errorf(baton.ECodePayloadTooLarge, format, args...)
}

// PutFile stores content at path (filearea.FileStore).
func (db *DB) PutFile(ctx context.Context, sessionID, path string, content []byte, lim filearea.Limits) (*filearea.File, error) {
	size := int64(len(content))
	if lim.MaxFileBytes > 0 && size > lim.MaxFileBytes {
		return nil, errTooLarge("file is larger than %d bytes", lim.MaxFileBytes)
	}
	f := &filearea.File{Path: path, Size: size, SHA256: filearea.Digest(content), UpdatedAt: baton.Now()}
	err := db.w.do(ctx, func(t *wtx) error {
		if err := t.writableSession(sessionID, lim.AfterClose); err != nil {
			return err
		}
		if err := t.checkShape(sessionID, path); err != nil {
			return err
		}
		var total, count int64
		err := t.get(`SELECT COALESCE(SUM(size), 0), COUNT(*) FROM session_files WHERE session_id = $1 AND path <> $2`,
			[]any{sessionID, path}, &total, &count)
		if err != nil {
			return fmt.Errorf("put file: %w", err)
		}
		if lim.MaxSessionBytes > 0 && total+size > lim.MaxSessionBytes {
			return errTooLarge("the session's files would take more than %d bytes", lim.MaxSessionBytes)
		}
		if lim.MaxSessionFiles > 0 && count+1 > lim.MaxSessionFiles {
			return errTooLarge("the session would hold more than %d files", lim.MaxSessionFiles)
		}
		_, err = t.exec(`INSERT INTO session_files (session_id, path, size, sha256, updated_at, content)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (session_id, path) DO UPDATE SET size = excluded.size, sha256 = excluded.sha256,
	updated_at = excluded.updated_at, content = excluded.content`,
			sessionID, path, size, f.SHA256, formatTime(f.UpdatedAt), content)
		if err != nil {
			return fmt.Errorf("put file: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// writableSession checks that the session exists and is open (or only
// exists, with afterClose), locking its row until the transaction ends.
func (t *wtx) writableSession(id string, afterClose bool) error {
	var state string
	err := t.get(`SELECT state FROM sessions WHERE id = $1`+t.w.lock, []any{id}, &state)
	if errors.Is(err, sql.ErrNoRows) {
		return errNoSession(id)
	}
	if err != nil {
		return fmt.Errorf("look up session: %w", err)
	}
	if baton.SessionState(state) != baton.StateOpen && !afterClose {
		return baton.Errorf(baton.ECodeSessionClosed, "session is %s", state)
	}
	return nil
}

// checkShape refuses a file at path when a directory above it is a file,
// or when path is a directory.
func (t *wtx) checkShape(sessionID, path string) error {
	if up := filearea.Ancestors(path); len(up) > 0 {
		args := make([]any, 0, len(up)+1)
		args = append(args, sessionID)
		marks := make([]string, len(up))
		for i, a := range up {
			args = append(args, a)
			marks[i] = "$" + strconv.Itoa(i+2)
		}
		var file string
		err := t.get(`SELECT path FROM session_files WHERE session_id = $1 AND path IN (`+strings.Join(marks, ", ")+`) LIMIT 1`, args, &file)
		switch {
		case err == nil:
			return baton.Errorf(baton.ECodeConflict, "%s is a file, not a directory", file)
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("put file: %w", err)
		}
	}
	lo, hi := filearea.DirRange(path)
	var below string
	err := t.get(`SELECT path FROM session_files WHERE session_id = $1 AND path >= $2 AND path < $3 LIMIT 1`,
		[]any{sessionID, lo, hi}, &below)
	switch {
	case err == nil:
		return baton.Errorf(baton.ECodeConflict, "%s is a directory", path)
	case !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("put file: %w", err)
	}
	return nil
}

// StatFile returns a file's record (filearea.FileStore).
func (db *DB) StatFile(ctx context.Context, sessionID, path string) (*filearea.File, error) {
	f, err := scanFile(db.queryRow(ctx, `SELECT `+fileCols+` FROM session_files WHERE session_id = $1 AND path = $2`, sessionID, path))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, filearea.ErrNotFound(path)
	}
	if err != nil {
		return nil, fmt.Errorf("stat file: %w", err)
	}
	return f, nil
}

// ReadFile returns a file's record and content (filearea.FileStore).
func (db *DB) ReadFile(ctx context.Context, sessionID, path string) (*filearea.File, []byte, error) {
	var (
		f       filearea.File
		updated string
		content []byte
	)
	err := db.read.QueryRowContext(ctx, `SELECT `+fileCols+`, content FROM session_files WHERE session_id = $1 AND path = $2`,
		sessionID, path).Scan(&f.Path, &f.Size, &f.SHA256, &updated, &content)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, filearea.ErrNotFound(path)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read file: %w", err)
	}
	if f.UpdatedAt, err = parseTime(updated); err != nil {
		return nil, nil, err
	}
	if content == nil {
		content = []byte{}
	}
	return &f, content, nil
}

// DeleteFile removes a file (filearea.FileStore).
func (db *DB) DeleteFile(ctx context.Context, sessionID, path string, lim filearea.Limits) error {
	return db.w.do(ctx, func(t *wtx) error {
		if err := t.writableSession(sessionID, lim.AfterClose); err != nil {
			return err
		}
		n, err := t.execAffected(`DELETE FROM session_files WHERE session_id = $1 AND path = $2`, sessionID, path)
		if err != nil {
			return fmt.Errorf("delete file: %w", err)
		}
		if n == 0 {
			return filearea.ErrNotFound(path)
		}
		return nil
	})
}

// ListFiles returns the records below dir, sorted by path
// (filearea.FileStore).
func (db *DB) ListFiles(ctx context.Context, sessionID, dir string) ([]*filearea.File, error) {
	q := `SELECT ` + fileCols + ` FROM session_files WHERE session_id = $1 ORDER BY path`
	args := []any{sessionID}
	if dir != "" {
		lo, hi := filearea.DirRange(dir)
		q = `SELECT ` + fileCols + ` FROM session_files WHERE session_id = $1 AND path >= $2 AND path < $3 ORDER BY path`
		args = append(args, lo, hi)
	}
	rows, err := db.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list files: %w", err)
	}
	defer rows.Close()
	files := []*filearea.File{}
	for rows.Next() {
		f, err := scanFile(rows)
		if err != nil {
			return nil, fmt.Errorf("list files: %w", err)
		}
		files = append(files, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list files: %w", err)
	}
	return files, nil
}
