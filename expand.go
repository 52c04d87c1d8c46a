package baton

import (
	"errors"
	"fmt"
	"strings"
)

// ExpandVars replaces every ${NAME} in s with the value lookup returns for
// NAME (bae-config.toml templates, spec-admin §5.2). A '$' not followed by
// '{' is kept literally. A "${" without a closing '}' fails with an
// "unterminated" error; a variable lookup does not know fails with an error
// that names the variable; a nil lookup knows no variable. Errors never
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
			return "", errors.New("unterminated ${ in template")
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
			return "", fmt.Errorf("environment variable %q is not set", name)
		}
		b.WriteString(v)
		s = rest[end+1:]
		i = strings.Index(s, "${")
	}
	b.WriteString(s)
	return b.String(), nil
}
