package httpx

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/baton-engine/baton"
)

// Page sizes (BAE's client API).
const (
	DefaultLimit = 50
	MaxLimit     = 200
)

// PageQuery is the cursor and limit of a list request's query string,
// parsed but not yet validated. Parsing and validation are separate steps
// because BAE's framework parses the query before the handler runs (a
// non-integer limit is a plain-text 400 even before authentication), while
// the handler validates the limit only after its own earlier checks.
type PageQuery struct {
	Cursor string
	limit  int64
	set    bool // the limit parameter was given
	values url.Values
}

// ParsePageQuery parses r's query string; fields names the parameters the
// route reads besides cursor and limit. A query string that does not
// decode, a field given twice, or a limit that is not a 64-bit integer, is
// a 400 rejection. Other parameters are ignored, repeated or not.
func ParsePageQuery(r *http.Request, fields ...string) (PageQuery, error) {
	values, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return PageQuery{}, &Rejection{Status: http.StatusBadRequest, Text: "Failed to deserialize query string: " + err.Error()}
	}
	for _, name := range append([]string{"cursor", "limit"}, fields...) {
		if len(values[name]) > 1 {
			return PageQuery{}, &Rejection{Status: http.StatusBadRequest,
				Text: "Failed to deserialize query string: duplicate field `" + name + "`"}
		}
	}
	q := PageQuery{Cursor: values.Get("cursor"), values: values}
	if vs, ok := values["limit"]; ok && len(vs) > 0 {
		n, err := strconv.ParseInt(vs[0], 10, 64)
		if err != nil {
			return PageQuery{}, &Rejection{Status: http.StatusBadRequest,
				Text: "Failed to deserialize query string: limit: " + numError(err)}
		}
		q.limit, q.set = n, true
	}
	return q, nil
}

// Get returns another query parameter of the parsed query string.
func (q PageQuery) Get(name string) string { return q.values.Get(name) }

// Page validates the limit: absent means DefaultLimit, more than MaxLimit is
// clamped to MaxLimit, and zero or negative is 400 bad_request. The cursor
// is passed on as it came; the store validates it.
func (q PageQuery) Page() (baton.Page, error) {
	limit := int64(DefaultLimit)
	if q.set {
		limit = q.limit
	}
	if limit <= 0 {
		return baton.Page{}, baton.Errorf(baton.ECodeBadRequest, "limit must be a positive integer")
	}
	return baton.Page{Cursor: q.Cursor, Limit: int(min(limit, MaxLimit))}, nil
}

// numError words a strconv failure as BAE's query parser does.
func numError(err error) string {
	var ne *strconv.NumError
	if errors.As(err, &ne) {
		switch {
		case ne.Num == "":
			return "cannot parse integer from empty string"
		case ne.Err == strconv.ErrRange:
			return "number too large to fit in target type"
		}
	}
	return "invalid digit found in string"
}

// PageBody is the JSON of one page of a list: {"items":[…],"next_cursor":…}.
type PageBody[T any] struct {
	Items      []T     `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

// NewPage builds a page body; items are never null and an empty next cursor
// is null.
func NewPage[T any](items []T, next string) PageBody[T] {
	if items == nil {
		items = []T{}
	}
	p := PageBody[T]{Items: items}
	if next != "" {
		p.NextCursor = &next
	}
	return p
}
