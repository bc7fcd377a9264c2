package logging

import (
	"bytes"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func newTestLogger(buf *bytes.Buffer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func TestLineWriterPlainLines(t *testing.T) {
	var buf bytes.Buffer
	red := NewRedactor("my-secret-pat")
	w := LineWriter(newTestLogger(&buf), "stderr", red)
	// Writes split lines arbitrarily, as a pipe does.
	for _, chunk := range []string{"first li", "ne\r\nsecond my-secret-", "pat line\n\n   \nERROR: unexpected status 401 sk-abcdefghijkl", "mno\n", "tail without newline"} {
		n, err := w.Write([]byte(chunk))
		require.NoError(t, err)
		require.Equal(t, len(chunk), n)
	}
	require.NoError(t, w.Close())
	require.NoError(t, w.Close())
	_, err := w.Write([]byte("late\n"))
	require.ErrorIs(t, err, ErrClosed)

	recs := decodeLines(t, buf.Bytes())
	require.Len(t, recs, 4)
	var lines []string
	for _, r := range recs {
		require.Equal(t, ChildOutputMsg, r["msg"])
		require.Equal(t, "stderr", r["stream"])
		require.Equal(t, "INFO", r["level"])
		lines = append(lines, r["line"].(string))
	}
	require.Equal(t, []string{"first line", "second [REDACTED] line", "ERROR: unexpected status 401 [REDACTED]", "tail without newline"}, lines)
	require.NotContains(t, buf.String(), "my-secret-pat")
}

func TestLineWriterJSONLines(t *testing.T) {
	var buf bytes.Buffer
	w := LineWriter(newTestLogger(&buf), "stderr", NewRedactor())
	fmt.Fprintln(w, `{"timestamp":"2026-01-01T00:00:00Z","level":"ERROR","target":"codex_core::client","fields":{"message":"request failed: Bearer abcdefgh","api_key":"sk-abcdefghijkl"},"span":{"name":"x"}}`)
	fmt.Fprintln(w, `{"level":"WARN","message":"retrying","target":"codex_app_server"}`)
	fmt.Fprintln(w, `{"time":"2026-11-29T09:00:00.000+00:00","level":"debug","subsystem":"gateway/ws","message":"openclaw style","apiKey":"k"}`)
	fmt.Fprintln(w, `{"no":"message","secret":"hidden-value"}`)
	fmt.Fprintln(w, `{not json at all sk-abcdefghijkl`)
	require.NoError(t, w.Close())

	recs := decodeLines(t, buf.Bytes())
	require.Len(t, recs, 5)
	require.Equal(t, map[string]any{"level": "ERROR", "msg": ChildOutputMsg, "stream": "stderr", "childLevel": "error",
		"target": "codex_core::client", "line": "request failed: Bearer [REDACTED]"}, dropTime(recs[0]))
	require.Equal(t, map[string]any{"level": "WARN", "msg": ChildOutputMsg, "stream": "stderr", "childLevel": "warn",
		"target": "codex_app_server", "line": "retrying"}, dropTime(recs[1]))
	require.Equal(t, map[string]any{"level": "DEBUG", "msg": ChildOutputMsg, "stream": "stderr", "childLevel": "debug",
		"subsystem": "gateway/ws", "line": "openclaw style"}, dropTime(recs[2]))
	require.Equal(t, map[string]any{"level": "INFO", "msg": ChildOutputMsg, "stream": "stderr", "line": ""}, dropTime(recs[3]))
	require.Equal(t, "{not json at all [REDACTED]", recs[4]["line"])
	require.NotContains(t, buf.String(), "hidden-value")
	require.NotContains(t, buf.String(), "span")
}

func dropTime(m map[string]any) map[string]any {
	delete(m, "time")
	return m
}

func TestLineWriterBoundsLines(t *testing.T) {
	var buf bytes.Buffer
	w := LineWriter(newTestLogger(&buf), "stderr", nil)
	long := strings.Repeat("x", MaxLineBytes-1) + "é" + strings.Repeat("y", 3*MaxLineBytes)
	// Deliver in small pieces so truncation spans writes.
	for i := 0; i < len(long); i += 1000 {
		_, err := w.Write([]byte(long[i:min(i+1000, len(long))]))
		require.NoError(t, err)
	}
	fmt.Fprint(w, "\nnext\n")
	fmt.Fprint(w, `{"message":"`+strings.Repeat("z", MaxLineBytes)+`"}`+"\n")
	require.NoError(t, w.Close())
	recs := decodeLines(t, buf.Bytes())
	require.Len(t, recs, 3)
	first := recs[0]["line"].(string)
	require.Equal(t, true, recs[0]["truncated"])
	require.True(t, utf8.ValidString(first))
	require.Equal(t, strings.Repeat("x", MaxLineBytes-1), first) // the split rune is cut, not mangled
	require.Equal(t, "next", recs[1]["line"])
	require.NotContains(t, recs[1], "truncated")
	// A truncated JSON line is logged as text, never half-parsed.
	require.Equal(t, true, recs[2]["truncated"])
	require.True(t, strings.HasPrefix(recs[2]["line"].(string), `{"message":"zzz`))
}

// TestLineWriterChildProcess feeds a real child's stderr through the adapter.
func TestLineWriterChildProcess(t *testing.T) {
	var buf bytes.Buffer
	red := NewRedactor("pat-0123456789")
	w := LineWriter(newTestLogger(&buf), "stderr", red)
	cmd := exec.Command("sh", "-c", `echo "starting" >&2; echo "token pat-0123456789 loaded" >&2; printf 'no newline' >&2`)
	cmd.Stderr = w
	require.NoError(t, cmd.Run())
	require.NoError(t, w.Close())
	recs := decodeLines(t, buf.Bytes())
	require.Len(t, recs, 3)
	require.Equal(t, "token [REDACTED] loaded", recs[1]["line"])
	require.Equal(t, "no newline", recs[2]["line"])
}

// FuzzLineWriter checks that arbitrary child output never panics, never
// produces invalid JSON records, and never leaks a registered secret.
func FuzzLineWriter(f *testing.F) {
	f.Add([]byte("hello\nworld\n"))
	f.Add([]byte(`{"level":"INFO","fields":{"message":"m"},"target":"t"}` + "\n"))
	f.Add([]byte("\x1b[31mred\x1b[0m SECRETSECRET\r\n"))
	f.Add([]byte{0xff, 0xfe, '\n', '{'})
	f.Fuzz(func(t *testing.T, data []byte) {
		var buf bytes.Buffer
		w := LineWriter(newTestLogger(&buf), "stderr", NewRedactor("SECRETSECRET"))
		_, err := w.Write(data)
		require.NoError(t, err)
		require.NoError(t, w.Close())
		for _, r := range decodeLines(t, buf.Bytes()) {
			line, _ := r["line"].(string)
			require.NotContains(t, line, "SECRETSECRET")
			require.LessOrEqual(t, len(line), MaxLineBytes*3) // JSON escapes may widen, never unbounded
		}
	})
}
