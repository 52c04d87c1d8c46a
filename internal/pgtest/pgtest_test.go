package pgtest

import (
	"database/sql"
	"testing"
)

func TestSchema(t *testing.T) {
	var name string
	t.Run("fresh", func(t *testing.T) {
		dsn := Schema(t)
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(`CREATE TABLE t (x int)`); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRow(`SELECT current_schema()`).Scan(&name); err != nil || name == "public" {
			t.Fatalf("current schema %q, %v; want the fresh one", name, err)
		}
	})
	if name == "" {
		return // skipped: no test database
	}
	db, err := sql.Open("pgx", Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1`, name).Scan(&n); err != nil || n != 0 {
		t.Errorf("schema %s still there after its test: %d, %v", name, n, err)
	}
}
