// Package logtest is test support for oce's JSON logs: a buffer safe for
// concurrent writers that parses the records it collected.
package logtest

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

// Buffer collects log output from concurrent writers.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Records parses the JSON lines written so far; a line that is not a JSON
// object fails the test.
func (s *Buffer) Records(t testing.TB) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line is not a JSON object: %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// JSONRecords parses the JSON object lines written so far and skips any
// other line (a supervisor's stderr may carry plain child output).
func (s *Buffer) JSONRecords() []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(s.String(), "\n") {
		var m map[string]any
		if l != "" && json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}
