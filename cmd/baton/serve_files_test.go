package main

import (
	"strings"
	"testing"
	"time"

	"github.com/baton-engine/baton/filearea"
	"github.com/google/go-cmp/cmp"
)

func TestLoadFileConfig(t *testing.T) {
	t.Parallel()
	c, err := loadFileConfig(envFunc(map[string]string{}))
	if err != nil {
		t.Fatal(err)
	}
	want := fileConfig{Limits: filearea.Limits{MaxFileBytes: 64 << 20, MaxSessionBytes: 1 << 30, MaxSessionFiles: 10_000,
		MaxArtifactBytes: 64 << 20}, ViewTokenTTL: 24 * time.Hour}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	c, err = loadFileConfig(envFunc(map[string]string{
		"BATON_MAX_FILE_BYTES": "10", "BATON_MAX_SESSION_FILE_BYTES": " 20 ", "BATON_MAX_SESSION_FILES": "3",
		"BATON_MAX_ARTIFACT_BYTES": "40", "BATON_FS_TOKEN_TTL": "2h",
	}))
	want = fileConfig{Limits: filearea.Limits{MaxFileBytes: 10, MaxSessionBytes: 20, MaxSessionFiles: 3, MaxArtifactBytes: 40},
		ViewTokenTTL: 2 * time.Hour}
	if diff := cmp.Diff(want, c); diff != "" || err != nil {
		t.Errorf("from the environment (-want +got):\n%s%v", diff, err)
	}
	_, err = loadFileConfig(envFunc(map[string]string{"BATON_MAX_FILE_BYTES": "0", "BATON_MAX_ARTIFACT_BYTES": "1MiB", "BATON_FS_TOKEN_TTL": "-1s"}))
	for _, name := range []string{"BATON_MAX_FILE_BYTES", "BATON_MAX_ARTIFACT_BYTES", "BATON_FS_TOKEN_TTL"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("error %v does not name %s", err, name)
		}
	}
}
