package main

import (
	"testing"

	"github.com/baton-engine/baton/internal/pgtest"
)

// postgresSchema returns a DSN for a fresh schema of the test database
// (dropped at cleanup), or skips when BATON_TEST_POSTGRES_DSN is unset.
func postgresSchema(t *testing.T) string { return pgtest.Schema(t) }
