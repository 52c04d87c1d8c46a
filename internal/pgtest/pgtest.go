// Package pgtest gives tests a throwaway schema of the PostgreSQL test
// database that BATON_TEST_POSTGRES_DSN names (scripts/pg.sh starts one),
// so that PostgreSQL tests can run in parallel on one server without
// seeing each other's tables.
package pgtest

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// Env names the DSN of the test database.
const Env = "BATON_TEST_POSTGRES_DSN"

// Schema creates a fresh, empty schema in the test database and returns a
// DSN whose search_path is that schema. The schema and everything in it
// is dropped when the test ends, after the cleanups registered later (so
// call Schema before opening anything on it). Without Env set, the test
// is skipped.
func Schema(t testing.TB) string {
	t.Helper()
	base := os.Getenv(Env)
	if base == "" {
		t.Skipf("%s is not set; start a throwaway PostgreSQL with scripts/pg.sh start <dir>", Env)
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s: %v", Env, err)
	}
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	schema := "baton_test_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(`CREATE SCHEMA ` + schema); err != nil {
		_ = admin.Close()
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec(`DROP SCHEMA ` + schema + ` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
		_ = admin.Close()
	})
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
