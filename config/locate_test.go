package config

import "testing"

func TestLocate(t *testing.T) {
	doc := "" +
		"top = 1\n" + // 1
		"[agent.env]\n" + // 2
		"A = 'x'\n" + // 3
		"[agent]\n" + // 4
		"model = 'm'\n" + // 5
		"inline = { a = 1, b = [10, { c = 2 }] }\n" + // 6
		"[[tools]]\n" + // 7
		"name = 'one'\n" + // 8
		"[[tools]]\n" + // 9
		"name = 'two'\n" + // 10
		"[tools.input_schema]\n" + // 11: the last tool's sub-table
		"type = 'object'\n" + // 12
		"dotted.key.here = true\n" // 13
	whole, parts := Locate([]byte(doc)), LocateKeyParts([]byte(doc))
	cases := []struct {
		path      string
		line, col int
		// where LocateKeyParts differs (a header's parts at themselves)
		partLine, partCol int
	}{
		{"top", 1, 1, 0, 0},
		{"agent", 4, 2, 2, 2},
		{"agent.env", 2, 2, 2, 8},
		{"agent.env.A", 3, 1, 0, 0},
		{"agent.model", 5, 1, 0, 0},
		{"agent.inline", 6, 1, 0, 0},
		{"agent.inline.a", 6, 12, 0, 0},
		{"agent.inline.b", 6, 19, 0, 0},
		{"agent.inline.b.0", 6, 24, 0, 0},
		{"agent.inline.b.1", 6, 28, 0, 0},
		{"agent.inline.b.1.c", 6, 30, 0, 0},
		{"tools.0", 7, 3, 0, 0},
		{"tools.0.name", 8, 1, 0, 0},
		{"tools.1", 9, 3, 0, 0},
		{"tools.1.name", 10, 1, 0, 0},
		{"tools.1.input_schema", 11, 2, 11, 8},
		{"tools.1.input_schema.type", 12, 1, 0, 0},
		{"tools.1.input_schema.dotted.key.here", 13, 12, 0, 0},
		// Not written: the nearest located ancestor.
		{"agent.inline.nope", 6, 1, 0, 0},
		{"tools.1.timeout", 9, 3, 0, 0},
		// Nothing to go on.
		{"nope", 0, 0, 0, 0},
		{"tools", 0, 0, 0, 0},
		{"", 0, 0, 0, 0},
	}
	for _, c := range cases {
		if line, col := whole.Position(c.path); line != c.line || col != c.col {
			t.Errorf("Locate: Position(%q) = %d:%d, want %d:%d", c.path, line, col, c.line, c.col)
		}
		if c.partLine == 0 {
			c.partLine, c.partCol = c.line, c.col
		}
		if line, col := parts.Position(c.path); line != c.partLine || col != c.partCol {
			t.Errorf("LocateKeyParts: Position(%q) = %d:%d, want %d:%d", c.path, line, col, c.partLine, c.partCol)
		}
	}
	for path, want := range map[string]bool{
		"agent.inline.b.1.c": true, "agent.env": true, "tools.1.input_schema": true,
		"tools": false, "agent.inline.nope": false, "tools.2": false,
	} {
		for _, l := range []*Locator{whole, parts} {
			if got := l.Has(path); got != want {
				t.Errorf("Has(%q) = %v, want %v", path, got, want)
			}
		}
	}

	var none *Locator
	if line, col := none.Position("top"); line != 0 || col != 0 || none.Has("top") {
		t.Errorf("nil Locator: %d:%d, Has %v", line, col, none.Has("top"))
	}
	if e := none.errorAt("top", "bad"); e.Line != 0 || e.Msg != "bad" {
		t.Errorf("nil Locator error: %+v", e)
	}
}
