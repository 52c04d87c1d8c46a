package config

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// locator remembers where each key of a syntactically valid document is
// defined, so that semantic errors found after decoding can point at the
// offending line. Paths join key parts with '.', and elements of arrays of
// tables are addressed by index: "mcp.servers.1.name".
type locator struct {
	data   []byte
	offset map[string]int
}

// locate scans data, which must already have decoded without error.
func locate(data []byte) *locator {
	l := &locator{data: data, offset: map[string]int{}}
	count := map[string]int{} // elements seen so far of each array of tables
	var p unstable.Parser
	p.Reset(data)
	table := ""
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			var parts []string
			start := -1
			it := e.Key()
			for it.Next() {
				n := it.Node()
				if start < 0 {
					start = int(n.Raw.Offset)
				}
				parts = append(parts, string(n.Data))
			}
			path := ""
			for i, part := range parts {
				path = join(path, part)
				if i == len(parts)-1 && e.Kind == unstable.ArrayTable {
					n := count[path]
					count[path] = n + 1
					path = join(path, strconv.Itoa(n))
					break
				}
				// A header below an array of tables extends its last
				// element.
				if n := count[path]; n > 0 {
					path = join(path, strconv.Itoa(n-1))
				}
			}
			l.set(path, start)
			table = path
		case unstable.KeyValue:
			l.keyValue(table, e)
		}
	}
	return l
}

// keyValue records the key of kv (relative to table) and everything nested
// in its value.
func (l *locator) keyValue(table string, kv *unstable.Node) {
	path := table
	it := kv.Key()
	for it.Next() {
		n := it.Node()
		path = join(path, string(n.Data))
		l.set(path, int(n.Raw.Offset))
	}
	l.value(path, kv.Value())
}

func (l *locator) value(path string, v *unstable.Node) {
	switch v.Kind {
	case unstable.InlineTable:
		it := v.Children()
		for it.Next() {
			if kv := it.Node(); kv.Kind == unstable.KeyValue {
				l.keyValue(path, kv)
			}
		}
	case unstable.Array:
		it := v.Children()
		for i := 0; it.Next(); i++ {
			n := it.Node()
			p := join(path, strconv.Itoa(i))
			l.set(p, int(n.Raw.Offset))
			l.value(p, n)
		}
	}
}

func (l *locator) set(path string, offset int) {
	if _, ok := l.offset[path]; !ok && offset >= 0 && offset <= len(l.data) {
		l.offset[path] = offset
	}
}

// errorAt returns an *Error positioned at path, or at its nearest located
// ancestor; without one the error has no position.
func (l *locator) errorAt(path, msg string) *Error {
	e := &Error{Msg: msg}
	if l == nil {
		return e
	}
	for path != "" {
		if off, ok := l.offset[path]; ok {
			e.Line, e.Column = lineColumn(l.data, off)
			return e
		}
		i := strings.LastIndexByte(path, '.')
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return e
}

// lineColumn converts a byte offset to a 1-based line and byte column.
func lineColumn(data []byte, offset int) (int, int) {
	before := data[:offset]
	line := 1 + bytes.Count(before, []byte{'\n'})
	col := offset - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

func join(path, part string) string {
	if path == "" {
		return part
	}
	return path + "." + part
}
