package baton

import (
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"
)

var idShape = regexp.MustCompile(`^evt_[0-9a-f]{32}$`)

func TestNewEventID(t *testing.T) {
	before := time.Now().UnixMilli()
	seen := make(map[string]bool)
	for range 1000 {
		id := NewEventID()
		if !idShape.MatchString(id) {
			t.Fatalf("NewEventID() = %q, want evt_ and 32 lowercase hex", id)
		}
		if seen[id] {
			t.Fatalf("NewEventID() repeated %q", id)
		}
		seen[id] = true
	}
	ms, err := strconv.ParseInt(NewEventID()[4:16], 16, 64)
	if err != nil || ms < before || ms > time.Now().UnixMilli() {
		t.Fatalf("time prefix %d (err %v), want within [%d, now]", ms, err, before)
	}
}

func TestNewEventIDSortsByTime(t *testing.T) {
	a := NewEventID()
	// Ids of different milliseconds order by time whatever their random tail.
	b := fmt.Sprintf("evt_%012x%020d", time.Now().UnixMilli()+1, 0)
	if !(a < b) {
		t.Fatalf("%q does not sort before an id of the next millisecond %q", a, b)
	}
}
