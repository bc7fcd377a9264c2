package nodehost

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/internal/poll"
)

func TestMemoryWatchDebouncesChanges(t *testing.T) {
	h, dir := newTestHost(t, false)
	ws := filepath.Join(dir, "workspace")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan []string, 4)
	ready := make(chan struct{})
	go func() {
		close(ready)
		_ = h.watchMemory(ctx, func(p []string) { got <- p })
	}()
	<-ready
	// the watcher registers asynchronously: retry the first write until seen
	poll.Until(t, func() bool {
		require.NoError(t, os.WriteFile(filepath.Join(ws, "MEMORY.md"), []byte("x"), 0o600))
		select {
		case p := <-got:
			return len(p) == 1 && p[0] == "MEMORY.md"
		case <-time.After(MemoryDebounce + 500*time.Millisecond):
			return false
		}
	}, 10*time.Second, 10*time.Millisecond)

	// a burst in a new subdirectory arrives as one notification
	sub := filepath.Join(ws, "memory", "2026")
	require.NoError(t, os.MkdirAll(sub, 0o700))
	poll.Until(t, func() bool {
		for i := 0; i < 3; i++ {
			require.NoError(t, os.WriteFile(filepath.Join(sub, "day.md"), []byte{byte(i)}, 0o600))
		}
		require.NoError(t, os.WriteFile(filepath.Join(ws, "memory", "a.md"), []byte("a"), 0o600))
		select {
		case p := <-got:
			return len(p) == 2 && p[0] == "memory/2026/day.md" && p[1] == "memory/a.md"
		case <-time.After(MemoryDebounce + time.Second):
			return false
		}
	}, 15*time.Second, 10*time.Millisecond)

	// changes outside Memory are not reported
	require.NoError(t, os.WriteFile(filepath.Join(ws, "code.go"), []byte("y"), 0o600))
	select {
	case p := <-got:
		t.Fatalf("unexpected notification %v", p)
	case <-time.After(MemoryDebounce + 300*time.Millisecond):
	}
}
