package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// admin calls the few admin API routes loadgen needs.
type admin struct {
	base  string
	token string
	hc    *http.Client
}

// post sends a JSON body and decodes a 201 answer into out.
func (a *admin) post(ctx context.Context, path string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(a.base, "/")+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("POST %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("POST %s: HTTP %d: %s", path, resp.StatusCode, bytes.TrimSpace(body))
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("POST %s: %w", path, err)
	}
	return nil
}

// setup creates a profile whose primary provider is provider and that
// allows tool, plus a client key for it, and returns the key's plaintext.
// name makes the profile name unique (profile names are).
func (a *admin) setup(ctx context.Context, name, provider, tool string) (profileID, key string, err error) {
	var p struct {
		ID string `json:"id"`
	}
	err = a.post(ctx, "/admin/v1/profiles", map[string]any{
		"name": name, "primary_provider": provider, "allowed_tools": []string{tool},
	}, &p)
	if err != nil {
		return "", "", fmt.Errorf("create profile: %w", err)
	}
	var k struct {
		Key string `json:"key"`
	}
	if err := a.post(ctx, "/admin/v1/keys", map[string]any{"name": name, "profile_id": p.ID}, &k); err != nil {
		return "", "", fmt.Errorf("create client key: %w", err)
	}
	if p.ID == "" || k.Key == "" {
		return "", "", fmt.Errorf("admin API answered without an id or key")
	}
	return p.ID, k.Key, nil
}
