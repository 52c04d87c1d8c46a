package main

import (
	"context"
	"testing"
)

// memSettings is an in-memory baton.SettingStore.
type memSettings map[string]string

func (m memSettings) EnsureSetting(_ context.Context, name, value string) (string, error) {
	if v, ok := m[name]; ok {
		return v, nil
	}
	m[name] = value
	return value, nil
}

// TestPublicURL: BATON_PUBLIC_URL must be a client origin; unset, the
// listener's URL is used.
func TestPublicURL(t *testing.T) {
	t.Parallel()
	for v, ok := range map[string]bool{
		"":                               true,
		"https://baton.example.com":      true,
		"http://10.0.0.5:8080/":          true,
		"ftp://baton.example.com":        false,
		"baton.example.com":              false,
		"https://baton.example.com/api":  false,
		"https://baton.example.com/?x=1": false,
		"https://":                       false,
	} {
		c, err := loadServeConfig(envFunc(map[string]string{"BATON_PUBLIC_URL": v}), nil)
		if (err == nil) != ok {
			t.Errorf("BATON_PUBLIC_URL=%q: err %v", v, err)
		}
		if err != nil {
			continue
		}
		b, err := openBrainAccess(context.Background(), memSettings{}, c.PublicURL)
		if err != nil || b.public != v {
			t.Errorf("BATON_PUBLIC_URL=%q kept as %q (%v)", v, b.public, err)
		}
	}
}
