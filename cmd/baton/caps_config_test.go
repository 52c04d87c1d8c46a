package main

import (
	"strings"
	"testing"

	"github.com/baton-engine/baton/engine"
)

// TestConfigSessionCaps: the per-session caps of queued turns and
// subscribers default to the engine's and take positive whole numbers.
func TestConfigSessionCaps(t *testing.T) {
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
