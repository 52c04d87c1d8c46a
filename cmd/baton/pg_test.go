package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/baton-engine/baton"
)

// postgresSchema returns a DSN for a fresh schema of the test database
// (dropped at cleanup), or skips when BATON_TEST_POSTGRES_DSN is unset.
func postgresSchema(t *testing.T) string {
	t.Helper()
	base := os.Getenv("BATON_TEST_POSTGRES_DSN")
	if base == "" {
		t.Skip("BATON_TEST_POSTGRES_DSN is not set (scripts/pg.sh start <dir> prints one)")
	}
	db, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	schema := "e2e_" + baton.NewID("")[:16]
	if _, err := db.ExecContext(context.Background(), "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		db.ExecContext(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		db.Close()
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return fmt.Sprint(u)
}
