package client

import (
	"encoding/json"
	"time"
)

// The readers below decode event views and sendMessage results in place
// (see scan.go), exactly as encoding/json decodes them into eventView and
// sendResult, without copying payloads or message content: those point
// into the input unless a copy is asked for.

// decodeEvent decodes the EventView text v into *e as Event.UnmarshalJSON
// does. keep copies the payload, for v in a buffer that will be reused.
// in, when not nil, shares the strings that recur.
func decodeEvent(v []byte, e *Event, in interner, keep bool) error {
	d := decoder{b: v}
	err := d.event(e, in)
	if err == nil {
		err = d.end()
	}
	if err != nil {
		return err
	}
	if keep && e.Payload != nil {
		e.Payload = append(json.RawMessage(nil), e.Payload...)
	}
	return nil
}

// event reads an EventView into *e: null gives the zero Event, an
// unparsable created_at a zero CreatedAt.
func (d *decoder) event(e *Event, in interner) error {
	*e = Event{}
	null, err := d.expect('{', "event", "an object")
	if err != nil || null {
		return err
	}
	shared := in.fn()
	var created []byte
	err = d.object(func(k []byte) (err error) {
		switch field(k, "id", "session_id", "client_key_id", "event_type", "payload", "created_at") {
		case 0:
			err = d.str(&e.ID, "id", nil)
		case 1:
			err = d.str(&e.SessionID, "session_id", shared)
		case 2:
			if d.peek() == 'n' { // a null pointer: no key
				e.ClientKeyID = ""
				return d.value()
			}
			err = d.str(&e.ClientKeyID, "client_key_id", shared)
		case 3:
			err = d.str(&e.Type, "event_type", shared)
		case 4:
			e.Payload, err = d.raw()
		case 5:
			created, err = d.stamp()
		default:
			err = d.value()
		}
		return err
	})
	if err != nil {
		return err
	}
	e.CreatedAt = parseStamp(created)
	return nil
}

// stamp reads a string member that is to be parsed as a time: its raw
// literal (quotes included), or nil for null.
func (d *decoder) stamp() ([]byte, error) {
	switch d.peek() {
	case 'n':
		return nil, d.value()
	case '"':
		start := d.i
		err := d.string()
		return d.b[start:d.i], err
	}
	return nil, d.mistyped("created_at", "a string")
}

// parseStamp returns the time of the JSON string lit as time.Parse reads
// it with time.RFC3339Nano, the zero time when it does not parse. The
// form Baton writes, 2006-01-02T15:04:05.000Z, is read here directly
// when its fields are in range; anything else goes to time.Parse.
func parseStamp(lit []byte) time.Time {
	if len(lit) == 0 {
		return time.Time{}
	}
	if len(lit) == 26 && lit[5] == '-' && lit[8] == '-' && lit[11] == 'T' && lit[14] == ':' && lit[17] == ':' && lit[20] == '.' && lit[24] == 'Z' {
		y, ok1 := decimal(lit[1:5])
		mo, ok2 := decimal(lit[6:8])
		d, ok3 := decimal(lit[9:11])
		h, ok4 := decimal(lit[12:14])
		mi, ok5 := decimal(lit[15:17])
		sec, ok6 := decimal(lit[18:20])
		ms, ok7 := decimal(lit[21:24])
		if ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7 && 1 <= mo && mo <= 12 && 1 <= d && d <= monthDays(y, mo) && h < 24 && mi < 60 && sec < 60 {
			return time.Date(y, time.Month(mo), d, h, mi, sec, ms*int(time.Millisecond), time.UTC)
		}
	}
	var s string
	if json.Unmarshal(lit, &s) != nil {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// monthDays returns the number of days of month mo (1 to 12) of year y.
func monthDays(y, mo int) int {
	switch mo {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// decimal reads the digits of b.
func decimal(b []byte) (int, bool) {
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// decodeSendResult decodes a sendMessage result as json.Unmarshal would
// into a new sendResult. The message content and the event payloads point
// into raw.
func decodeSendResult(raw []byte, in interner) (*sendResult, error) {
	res := new(sendResult)
	d := decoder{b: raw}
	err := res.read(&d, in)
	if err == nil {
		err = d.end()
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// read fills r from a result object; null changes nothing.
func (r *sendResult) read(d *decoder, in interner) error {
	null, err := d.expect('{', "result", "an object")
	if err != nil || null {
		return err
	}
	return d.object(func(k []byte) error {
		switch field(k, "message", "events") {
		case 0:
			return r.Message.read(d)
		case 1:
			return r.readEvents(d, in)
		}
		return d.value()
	})
}

// moved returns r with the message content and the event payloads, which
// point into from, pointing at the same bytes in to, a copy of from.
func (r *sendResult) moved(from, to []byte) *sendResult {
	r.Message.Content = rebase(r.Message.Content, from, to)
	for i := range r.Events {
		r.Events[i].Payload = rebase(r.Events[i].Payload, from, to)
	}
	return r
}

// rebase returns the bytes of to at the offset of sub in from. sub is a
// slice of from, so its offset is what their capacities differ by.
func rebase(sub, from, to []byte) []byte {
	if sub == nil {
		return nil
	}
	off := cap(from) - cap(sub)
	return to[off : off+len(sub) : off+len(sub)]
}

// read fills m from a message object; null changes nothing.
func (m *Message) read(d *decoder) error {
	null, err := d.expect('{', "message", "an object")
	if err != nil || null {
		return err
	}
	return d.object(func(k []byte) (err error) {
		switch field(k, "role", "content") {
		case 0:
			err = d.str(&m.Role, "message.role", role)
		case 1:
			m.Content, err = d.raw()
		default:
			err = d.value()
		}
		return err
	})
}

// readEvents sets r.Events from an array of event views; null clears it.
func (r *sendResult) readEvents(d *decoder, in interner) error {
	null, err := d.expect('[', "events", "an array")
	if err != nil || null {
		r.Events = nil
		return err
	}
	if r.Events == nil {
		r.Events = make([]Event, 0, 8)
	}
	r.Events = r.Events[:0]
	return d.array(func() error {
		r.Events = append(r.Events, Event{})
		return d.event(&r.Events[len(r.Events)-1], in)
	})
}

// role returns a message role, the usual ones without allocating.
func role(b []byte) string {
	switch string(b) {
	case "assistant":
		return "assistant"
	case "user":
		return "user"
	}
	return string(b)
}
