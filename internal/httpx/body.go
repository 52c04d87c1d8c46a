package httpx

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/rawjson"
	"github.com/baton-engine/baton/internal/serde"
)

// DefaultMaxBody is the request body limit when none is configured: 2 MiB,
// the default of BAE's HTTP framework, so anything BAE takes is taken.
const DefaultMaxBody = 2 << 20

// Framework rejection texts, as BAE's HTTP framework words them.
const (
	textContentType = "Expected request with `Content-Type: application/json`"
	textSyntax      = "Failed to parse the request body as JSON: "
	textShape       = "Failed to deserialize the JSON body into the target type: "
)

// ReadJSON reads a JSON request body the way BAE's JSON extractor does,
// before anything else about the request is looked at: a missing
// Content-Type, or one that is not application/json (parameters such as
// charset allowed, application/*+json accepted), is a 415 rejection; a body
// larger than max bytes (max <= 0 means DefaultMaxBody) is a 413
// payload_too_large problem; a body that is not valid UTF-8 is the 400
// rejection of malformed JSON, as serde_json refuses it (encoding/json,
// which every decoder behind this takes, would not).
func ReadJSON(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	if !isJSON(r.Header.Get("Content-Type")) {
		return nil, &Rejection{Status: http.StatusUnsupportedMediaType, Text: textContentType}
	}
	if max <= 0 {
		max = DefaultMaxBody
	}
	tooLarge := baton.Errorf(baton.ECodePayloadTooLarge, "request body is larger than %d bytes", max)
	if r.ContentLength > max {
		return nil, tooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge
		}
		return nil, BodyError(err)
	}
	if err := checkUTF8(body); err != nil {
		return nil, err
	}
	return body, nil
}

// checkUTF8 returns the 400 rejection of malformed JSON when body is not
// valid UTF-8, naming the offset of the first bad byte. Outside strings
// JSON is ASCII, so this is exactly the strictness encoding/json lacks.
func checkUTF8(body []byte) error {
	if utf8.Valid(body) {
		return nil
	}
	i := 0
	for i < len(body) {
		r, n := utf8.DecodeRune(body[i:])
		if r == utf8.RuneError && n == 1 {
			break
		}
		i += n
	}
	return &Rejection{Status: http.StatusBadRequest, Text: fmt.Sprintf("%sinvalid UTF-8 at offset %d", textSyntax, i)}
}

// isJSON reports whether a Content-Type value names JSON.
func isJSON(contentType string) bool {
	if contentType == "" {
		return false
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" ||
		(strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

// Object is one decoded JSON object whose members a handler reads one by
// one, so that a wrong shape is reported as BAE's framework reports it: a
// 422 rejection naming the member's path. Member names are matched exactly
// (case-sensitively); members nobody reads are ignored.
type Object struct {
	path    string
	members map[string]json.RawMessage
}

// DecodeObject parses a request body that must be one JSON object. Bad JSON
// syntax is a 400 rejection; valid JSON that is not an object a 422
// rejection.
func DecodeObject(body []byte) (Object, error) {
	var m map[string]json.RawMessage
	err := json.Unmarshal(body, &m)
	var syntax *json.SyntaxError
	switch {
	case errors.As(err, &syntax):
		return Object{}, &Rejection{Status: http.StatusBadRequest, Text: textSyntax + err.Error()}
	case err != nil || m == nil: // valid JSON, but not an object
		return ObjectAt("", body)
	}
	return Object{members: m}, nil
}

// ObjectAt decodes raw, a valid JSON value found at path, as an object.
func ObjectAt(path string, raw json.RawMessage) (Object, error) {
	if rawjson.Kind(raw) != '{' {
		return Object{}, Shape(path, "invalid type: %s, expected a map", serde.Unexpected(raw))
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return Object{}, Shape(path, "%v", err)
	}
	return Object{path: path, members: m}, nil
}

// Shape returns a 422 rejection for a wrong shape at path ("" for the
// body itself, else e.g. "tools[0].name").
func Shape(path, format string, args ...any) *Rejection {
	msg := fmt.Sprintf(format, args...)
	if path != "" {
		msg = path + ": " + msg
	}
	return &Rejection{Status: http.StatusUnprocessableEntity, Text: textShape + msg}
}

// Path returns the path of member key.
func (o Object) Path(key string) string {
	if o.path == "" {
		return key
	}
	return o.path + "." + key
}

// Raw returns member key, or false when it is absent or null.
func (o Object) Raw(key string) (json.RawMessage, bool) {
	raw, ok := o.members[key]
	if !ok || rawjson.Kind(raw) == 'n' {
		return nil, false
	}
	return raw, true
}

// String returns the required string member key.
func (o Object) String(key string) (string, error) {
	raw, ok := o.members[key]
	if !ok {
		return "", Shape(o.path, "missing field `%s`", key)
	}
	return o.str(key, raw)
}

// OptString returns the string member key, or nil when it is absent or
// null.
func (o Object) OptString(key string) (*string, error) {
	raw, ok := o.Raw(key)
	if !ok {
		return nil, nil
	}
	s, err := o.str(key, raw)
	if err != nil {
		return nil, err
	}
	return &s, nil
}

func (o Object) str(key string, raw json.RawMessage) (string, error) {
	var s string
	if rawjson.Kind(raw) != '"' || json.Unmarshal(raw, &s) != nil {
		return "", Shape(o.Path(key), "invalid type: %s, expected a string", serde.Unexpected(raw))
	}
	return s, nil
}

// Array returns the elements of the array member key; an absent member is
// an empty array (nil), and null or any other type is a shape error.
func (o Object) Array(key string) ([]json.RawMessage, error) {
	raw, ok := o.members[key]
	if !ok {
		return nil, nil
	}
	return o.array(key, raw)
}

// RequiredArray is Array for a member that must be present.
func (o Object) RequiredArray(key string) ([]json.RawMessage, error) {
	raw, ok := o.members[key]
	if !ok {
		return nil, Shape(o.path, "missing field `%s`", key)
	}
	return o.array(key, raw)
}

func (o Object) array(key string, raw json.RawMessage) ([]json.RawMessage, error) {
	if rawjson.Kind(raw) != '[' {
		return nil, Shape(o.Path(key), "invalid type: %s, expected a sequence", serde.Unexpected(raw))
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, Shape(o.Path(key), "%v", err)
	}
	return elems, nil
}

// OptUint returns the unsigned integer member key, or nil when it is absent
// or null.
func (o Object) OptUint(key string) (*uint64, error) {
	raw, ok := o.Raw(key)
	if !ok {
		return nil, nil
	}
	n, err := strconv.ParseUint(string(raw), 10, 64)
	if err != nil {
		return nil, Shape(o.Path(key), "invalid value: %s, expected u64", serde.Unexpected(raw))
	}
	return &n, nil
}
