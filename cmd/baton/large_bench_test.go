package main

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
)

func BenchmarkLargeMessage(b *testing.B) {
	s := startServer(b, benchWarn)
	key := benchKey(s)
	r := s.client("POST", "/api/v1/sessions", key, map[string]any{})
	m := r.json(b)
	sid, skey := m["session_id"].(string), m["session_key"].(string)
	rpc := func(body string) int64 {
		req, _ := http.NewRequest("POST", s.clientURL+"/api/v1/sessions/"+sid+"/rpc", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+skey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		n, _ := io.Copy(io.Discard, bufio.NewReader(resp.Body))
		return n
	}
	rpc(`{"jsonrpc":"2.0","id":1,"method":"session.registerDriver","params":{}}`)
	msg := `{"jsonrpc":"2.0","id":2,"method":"session.sendMessage","params":{"message":{"role":"user","content":"` + strings.Repeat("a", 7_500_000) + `"}}}`
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := rpc(msg)
		b.ReportMetric(float64(n), "wire-bytes")
	}
}
