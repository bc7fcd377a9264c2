package logging

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// BenchmarkRedactingHandler measures one record with a few attributes through
// the redacting JSON handler, with 20 registered secrets.
func BenchmarkRedactingHandler(b *testing.B) {
	red := NewRedactor()
	for i := range 20 {
		red.Add(fmt.Sprintf("secret-%02d-abcdefgh", i))
	}
	l := NewWithOptions(io.Discard, Options{Component: "gatewayd", Redactor: red})
	b.ReportAllocs()
	for b.Loop() {
		l.Info("spawned child", "phase", "native-spawn", "pid", 4242, "detail", "listening on 127.0.0.1:18789 secret-07-abcdefgh")
	}
}

// BenchmarkLineWriter measures child output lines turned into records.
func BenchmarkLineWriter(b *testing.B) {
	w := LineWriter(slog.New(slog.NewJSONHandler(io.Discard, nil)), "stderr", NewRedactor("pat-0123456789"))
	plain := []byte(strings.Repeat("x", 120) + " pat-0123456789\n")
	js := []byte(`{"timestamp":"2026-01-01T00:00:00Z","level":"INFO","target":"codex_app_server","fields":{"message":"` + strings.Repeat("y", 100) + `"}}` + "\n")
	b.ReportAllocs()
	b.SetBytes(int64(len(plain) + len(js)))
	for b.Loop() {
		_, _ = w.Write(plain)
		_, _ = w.Write(js)
	}
	b.ReportMetric(2, "lines/op")
}
