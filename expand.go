package baton

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUnterminatedVar is ExpandVars' error for a "${" without a closing '}'.
var ErrUnterminatedVar = errors.New("unterminated ${ in template")

// UnsetVarError is ExpandVars' error for a variable lookup does not know.
type UnsetVarError struct{ Name string }

func (e *UnsetVarError) Error() string {
	return fmt.Sprintf("environment variable %q is not set", e.Name)
}

// ExpandVars replaces every ${NAME} in s with the value lookup returns for
// NAME (bae-config.toml templates, BAE's admin API). A '$' not followed by
// '{' is kept literally. A "${" without a closing '}' fails with
// ErrUnterminatedVar; a variable lookup does not know fails with an
// *UnsetVarError; a nil lookup knows no variable. Errors never
// contain a resolved value, so they are safe to log.
func ExpandVars(s string, lookup func(string) (string, bool)) (string, error) {
	i := strings.Index(s, "${")
	if i < 0 {
		return s, nil
	}
	var b strings.Builder
	b.Grow(len(s))
	for i >= 0 {
		b.WriteString(s[:i])
		rest := s[i+2:]
		end := strings.IndexByte(rest, '}')
		if end < 0 {
			return "", ErrUnterminatedVar
		}
		name := rest[:end]
		if name == "" {
			return "", errors.New("empty variable name in ${}")
		}
		var v string
		ok := false
		if lookup != nil {
			v, ok = lookup(name)
		}
		if !ok {
			return "", &UnsetVarError{Name: name}
		}
		b.WriteString(v)
		s = rest[end+1:]
		i = strings.Index(s, "${")
	}
	b.WriteString(s)
	return b.String(), nil
}
