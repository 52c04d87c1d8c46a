package main

import (
	"bytes"
	"io"
	"net/http"
	"testing"
)

// BenchmarkSessionOpen measures POST /api/v1/sessions end to end over
// loopback HTTP: body parsing, client-key check, profile and provider
// checks, and the group-committed insert of session, key and event.
func BenchmarkSessionOpen(b *testing.B) {
	s := startServer(b)
	pro := s.profile(map[string]any{"name": "bench", "primary_provider": "script", "allowed_tools": []any{"get_time"}})
	_, key := s.clientKey("bench", pro)
	body := []byte(`{"client_version":"bench/1","tools":[{"name":"get_time","description":"now","input_schema":{"type":"object"}}]}`)
	url := s.clientURL + "/api/v1/sessions"
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 201 {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
	})
}
