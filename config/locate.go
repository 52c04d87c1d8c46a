package config

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// Locator tells where the keys of a TOML document are written, so that
// errors found after the document decoded can name a line and column.
//
// Keys are addressed by path: key parts joined with '.', elements of
// arrays and of arrays of tables by their index ("mcp.servers.1.name",
// "tools.0.command.2"). Every key of a key/value pair (each part of a
// dotted key, the keys of inline tables, the elements of arrays) is
// located where it is written; when a path is written twice, the first
// place counts. Where a table header points depends on how the Locator was
// made: Locate and LocateKeyParts.
type Locator struct {
	data   []byte
	offset map[string]int
}

// Locate scans data, which must already have decoded without error (a
// syntax error ends the scan: keys after it are not located). A table
// header locates only its table, at the header's first key part:
// [mcp.servers.extra] places mcp.servers.0.extra at "mcp".
func Locate(data []byte) *Locator { return locate(data, false) }

// LocateKeyParts is Locate with every key part of a table header located
// at itself: [tools.input_schema] places tools.0.input_schema at
// "input_schema", and tools.0, if not located before, at "tools".
func LocateKeyParts(data []byte) *Locator { return locate(data, true) }

func locate(data []byte, eachPart bool) *Locator {
	l := &Locator{data: data, offset: map[string]int{}}
	count := map[string]int{} // elements seen so far of each array of tables
	var p unstable.Parser
	p.Reset(data)
	table := ""
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			var parts []*unstable.Node
			it := e.Key()
			for it.Next() {
				parts = append(parts, it.Node())
			}
			path := ""
			for i, n := range parts {
				path = join(path, string(n.Data))
				if i == len(parts)-1 && e.Kind == unstable.ArrayTable {
					n := count[path]
					count[path] = n + 1
					path = join(path, strconv.Itoa(n))
				} else if n := count[path]; n > 0 {
					// A header below an array of tables extends its last
					// element.
					path = join(path, strconv.Itoa(n-1))
				}
				if eachPart {
					l.set(path, int(n.Raw.Offset))
				}
			}
			if !eachPart && len(parts) > 0 {
				l.set(path, int(parts[0].Raw.Offset))
			}
			table = path
		case unstable.KeyValue:
			l.keyValue(table, e)
		}
	}
	return l
}

// keyValue records the key of kv (relative to table) and everything nested
// in its value.
func (l *Locator) keyValue(table string, kv *unstable.Node) {
	path := table
	it := kv.Key()
	for it.Next() {
		n := it.Node()
		path = join(path, string(n.Data))
		l.set(path, int(n.Raw.Offset))
	}
	l.value(path, kv.Value())
}

func (l *Locator) value(path string, v *unstable.Node) {
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

// set locates path at offset unless it is located already.
func (l *Locator) set(path string, offset int) {
	if _, ok := l.offset[path]; !ok && offset >= 0 && offset <= len(l.data) {
		l.offset[path] = offset
	}
}

// Has reports whether the document writes the key at path. A nil Locator
// has no keys.
func (l *Locator) Has(path string) bool {
	if l == nil {
		return false
	}
	_, ok := l.offset[path]
	return ok
}

// Position returns the 1-based line and byte column of the key at path,
// or of its nearest located ancestor; 0, 0 when none is located (or l is
// nil).
func (l *Locator) Position(path string) (line, column int) {
	if l == nil {
		return 0, 0
	}
	for path != "" {
		if off, ok := l.offset[path]; ok {
			before := l.data[:off]
			return 1 + bytes.Count(before, []byte{'\n'}), off - bytes.LastIndexByte(before, '\n')
		}
		i := strings.LastIndexByte(path, '.')
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return 0, 0
}

// errorAt returns an *Error positioned at path, or at its nearest located
// ancestor; without one the error has no position.
func (l *Locator) errorAt(path, msg string) *Error {
	line, col := l.Position(path)
	return &Error{Line: line, Column: col, Msg: msg}
}

func join(path, part string) string {
	if path == "" {
		return part
	}
	return path + "." + part
}
