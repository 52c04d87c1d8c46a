package filearea

import "testing"

// oneEpoch knows a single current epoch per session.
type oneEpoch map[string]int64

func (o oneEpoch) CurrentEpoch(sessionID string) (int64, bool) {
	e, ok := o[sessionID]
	return e, ok
}

// manyEpochs knows several current epochs per session.
type manyEpochs map[string][]int64

func (m manyEpochs) CurrentEpoch(sessionID string) (int64, bool) {
	l := m[sessionID]
	if len(l) == 0 {
		return 0, false
	}
	return l[len(l)-1], true
}

func (m manyEpochs) IsCurrentEpoch(sessionID string, epoch int64) (bool, bool) {
	for _, e := range m[sessionID] {
		if e == epoch {
			return true, true
		}
	}
	return false, len(m[sessionID]) > 0
}

func TestEpochCurrent(t *testing.T) {
	one := oneEpoch{"ses_1": 5}
	many := manyEpochs{"ses_1": {3, 7}}
	for _, c := range []struct {
		e       Epochs
		session string
		epoch   int64
		want    bool
	}{
		{one, "ses_1", 5, true},
		{one, "ses_1", 4, false},
		{one, "ses_2", 4, true},  // bound nowhere here: not checked
		{many, "ses_1", 3, true}, // a brain and a sandbox, each at its own epoch
		{many, "ses_1", 7, true},
		{many, "ses_1", 6, false},
		{many, "ses_2", 1, true},
	} {
		if got := EpochCurrent(c.e, c.session, c.epoch); got != c.want {
			t.Errorf("EpochCurrent(%T, %s, %d) = %v, want %v", c.e, c.session, c.epoch, got, c.want)
		}
	}
}
