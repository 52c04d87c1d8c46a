package serde

import "testing"

// TestUnexpected: JSON values are named as serde_json names them in its
// "invalid type" messages.
func TestUnexpected(t *testing.T) {
	tests := []struct{ raw, want string }{
		{`{"a":1}`, "map"},
		{` [1]`, "sequence"},
		{`null`, "null"},
		{`true`, "boolean `true`"},
		{`false`, "boolean `false`"},
		{`"hi"`, `string "hi"`},
		{`"a\"b\\c\n\t\r\u0000"`, `string "a\"b\\c\n\t\r\0"`},
		{`"é\u0007\u200b'"`, `string "é\u{7}\u{200b}'"`},
		{`5`, "integer `5`"},
		{`-5`, "integer `-5`"},
		{`18446744073709551615`, "integer `18446744073709551615`"},
		{`18446744073709551616`, "floating point `1.8446744073709552e19`"},
		{`-9223372036854775809`, "floating point `-9.223372036854776e18`"},
		{`-0`, "floating point `-0.0`"},
		{`0.0`, "floating point `0.0`"},
		{`1.50`, "floating point `1.5`"},
		{`1e2`, "floating point `100.0`"},
		{`1e15`, "floating point `1000000000000000.0`"},
		{`1e16`, "floating point `1e16`"},
		{`1.25e17`, "floating point `1.25e17`"},
		{`0.001`, "floating point `0.001`"},
		{`0.00001`, "floating point `0.00001`"},
		{`0.000001`, "floating point `1e-6`"},
		{`-1.5e-7`, "floating point `-1.5e-7`"},
		{`123.456`, "floating point `123.456`"},
	}
	for _, tc := range tests {
		if got := Unexpected([]byte(tc.raw)); got != tc.want {
			t.Errorf("Unexpected(%s) = %s, want %s", tc.raw, got, tc.want)
		}
	}
}

// TestInvalidType: serde's whole message.
func TestInvalidType(t *testing.T) {
	if got, want := InvalidType([]byte(`"hi"`), "a sequence"), `invalid type: string "hi", expected a sequence`; got != want {
		t.Errorf("InvalidType = %s, want %s", got, want)
	}
}
