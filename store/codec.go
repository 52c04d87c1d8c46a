package store

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/baton-engine/baton"
	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
)

// defaultLimit is the page size used when a caller passes none.
const defaultLimit = 50

// parseCursor decodes a list cursor: the decimal ordering value of the last
// item of the previous page, or "" for the first page.
func parseCursor(c string) (int64, error) {
	if c == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(c, 10, 64)
	if err != nil {
		return 0, baton.Errorf(baton.ECodeBadRequest, "invalid cursor: %q", c)
	}
	return n, nil
}

func pageLimit(limit int) int {
	if limit <= 0 {
		return defaultLimit
	}
	return limit
}

// pageNext trims a limit+1 result to limit items and returns the cursor of
// the last kept item, or "" when there is no further page.
func pageNext[T any](items []T, ords []int64, limit int) ([]T, string) {
	if len(items) <= limit {
		return items, ""
	}
	return items[:limit], strconv.FormatInt(ords[limit-1], 10)
}

func formatTime(t time.Time) string { return baton.FormatTime(t) }

func parseTime(s string) (time.Time, error) {
	t, err := baton.ParseTime(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("store: bad stored timestamp %q: %w", s, err)
	}
	return t, nil
}

func parseNullTime(s sql.NullString) (*time.Time, error) {
	if !s.Valid {
		return nil, nil
	}
	t, err := parseTime(s.String)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

func nullTime(t *time.Time) sql.NullString {
	if t == nil {
		return sql.NullString{}
	}
	return sql.NullString{String: formatTime(*t), Valid: true}
}

func nullStringPtr(s *string) sql.NullString {
	if s == nil {
		return sql.NullString{}
	}
	return sql.NullString{String: *s, Valid: true}
}

// encodeStrings stores a string list; nil is stored as [].
func encodeStrings(v []string) (string, error) {
	if v == nil {
		v = []string{}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("store: encode list: %w", err)
	}
	return string(b), nil
}

func decodeStrings(s string) ([]string, error) {
	out := []string{}
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("store: decode list: %w", err)
	}
	if out == nil {
		out = []string{}
	}
	return out, nil
}

// encodeRaw stores a list of raw JSON values byte for byte (no
// re-encoding); an empty element is stored as null.
func encodeRaw(v []json.RawMessage) (string, error) {
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, raw := range v {
		if i > 0 {
			buf.WriteByte(',')
		}
		if len(raw) == 0 {
			buf.WriteString("null")
			continue
		}
		if !json.Valid(raw) {
			return "", fmt.Errorf("store: element %d is not valid JSON", i)
		}
		buf.Write(raw)
	}
	buf.WriteByte(']')
	return buf.String(), nil
}

func decodeRaw(s string) ([]json.RawMessage, error) {
	out := []json.RawMessage{}
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("store: decode list: %w", err)
	}
	if out == nil {
		out = []json.RawMessage{}
	}
	return out, nil
}

// encodeMap stores a per-client-key declaration map; nil maps and nil
// lists are stored empty.
func encodeMap[T any](m map[string][]T) (string, error) {
	norm := make(map[string][]T, len(m))
	for k, v := range m {
		if v == nil {
			v = []T{}
		}
		norm[k] = v
	}
	b, err := json.Marshal(norm)
	if err != nil {
		return "", fmt.Errorf("store: encode declarations: %w", err)
	}
	return string(b), nil
}

func decodeMap[T any](s string) (map[string][]T, error) {
	out := map[string][]T{}
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("store: decode declarations: %w", err)
	}
	if out == nil {
		out = map[string][]T{}
	}
	for k, v := range out {
		if v == nil {
			out[k] = []T{}
		}
	}
	return out, nil
}

// isUnique reports whether err is a unique-constraint violation.
func isUnique(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		const constraintUnique, constraintPrimaryKey = 2067, 1555
		return se.Code() == constraintUnique || se.Code() == constraintPrimaryKey
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "23505"
	}
	return false
}
