package logging

import (
	"bytes"
	"context"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/shared/runtimes"
)

// TestLineWriterRealCodex feeds the stderr of the real pinned Codex
// app-server (LOG_FORMAT=json, as Compute renders it) through LineWriter:
// its tracing JSON becomes records with only level, target and message.
func TestLineWriterRealCodex(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	paths, err := runtimes.Ensure(ctx)
	require.NoError(t, err)

	home := t.TempDir()
	var buf bytes.Buffer
	red := NewRedactor(home) // a path registered as a secret: must not reach the records
	w := LineWriter(NewWithOptions(&buf, Options{Level: slog.LevelDebug, Redactor: red}), "stderr", red)
	cmd := exec.CommandContext(ctx, paths.Codex, "app-server", "--listen", "stdio://")
	cmd.Dir = home
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "CODEX_HOME=" + home,
		"LOG_FORMAT=json", "RUST_LOG=info,codex_otel=off"}
	cmd.Stdin = strings.NewReader("") // EOF: the app-server exits
	cmd.Stderr = w
	require.NoError(t, cmd.Run())
	require.NoError(t, w.Close())

	recs := decodeLines(t, buf.Bytes())
	require.NotEmpty(t, recs)
	structured := 0
	for _, r := range recs {
		require.Equal(t, ChildOutputMsg, r["msg"])
		require.Equal(t, "stderr", r["stream"])
		for _, k := range []string{"timestamp", "fields", "span", "spans", "installation_id", "remote_control_url"} {
			require.NotContains(t, r, k)
		}
		if target, ok := r["target"].(string); ok {
			require.True(t, strings.HasPrefix(target, "codex_"), target)
			require.Contains(t, []any{"error", "warn", "info", "debug", "trace"}, r["childLevel"])
			structured++
		}
	}
	require.Positive(t, structured, "no tracing JSON line recognised: %s", buf.String())
	require.NotContains(t, buf.String(), home)
}
