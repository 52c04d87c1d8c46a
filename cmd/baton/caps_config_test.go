package main

import (
	"strings"
	"testing"

	"github.com/baton-engine/baton/engine"
	"github.com/baton-engine/baton/httpapi"
)

// TestConfigSessionCaps: the per-session caps of queued turns and
// subscribers default to the engine's and take positive whole numbers.
func TestConfigSessionCaps(t *testing.T) {
	t.Parallel()
	c, err := loadServeConfig(envFunc(map[string]string{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxQueuedTurns != engine.DefaultMaxQueuedTurns || c.MaxSubscribers != engine.DefaultMaxSubscribers {
		t.Fatalf("defaults %d, %d", c.MaxQueuedTurns, c.MaxSubscribers)
	}
	c, err = loadServeConfig(envFunc(map[string]string{"BATON_MAX_QUEUED_TURNS": "3", "BATON_MAX_SUBSCRIBERS_PER_SESSION": " 1000 "}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxQueuedTurns != 3 || c.MaxSubscribers != 1000 {
		t.Fatalf("caps %d, %d", c.MaxQueuedTurns, c.MaxSubscribers)
	}
	for _, name := range []string{"BATON_MAX_QUEUED_TURNS", "BATON_MAX_SUBSCRIBERS_PER_SESSION"} {
		for _, v := range []string{"0", "-1", "x", "70000"} {
			_, err := loadServeConfig(envFunc(map[string]string{name: v}), nil)
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s=%s: %v", name, v, err)
			}
		}
	}
}

// TestConfigInflightBudget: BATON_MAX_INFLIGHT_BYTES defaults to the
// client port's budget and takes a positive number of bytes.
func TestConfigInflightBudget(t *testing.T) {
	t.Parallel()
	c, err := loadServeConfig(envFunc(map[string]string{}), nil)
	if err != nil || c.MaxInflightBytes != httpapi.DefaultMaxInflight {
		t.Fatalf("default %d, %v", c.MaxInflightBytes, err)
	}
	if c, err = loadServeConfig(envFunc(map[string]string{"BATON_MAX_INFLIGHT_BYTES": "1048576"}), nil); err != nil || c.MaxInflightBytes != 1<<20 {
		t.Fatalf("set %d, %v", c.MaxInflightBytes, err)
	}
	for _, v := range []string{"0", "-1", "1MiB"} {
		if _, err := loadServeConfig(envFunc(map[string]string{"BATON_MAX_INFLIGHT_BYTES": v}), nil); err == nil || !strings.Contains(err.Error(), "BATON_MAX_INFLIGHT_BYTES") {
			t.Errorf("BATON_MAX_INFLIGHT_BYTES=%s: %v", v, err)
		}
	}
}
