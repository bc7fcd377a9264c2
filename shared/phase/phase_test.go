package phase

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/logging"
)

var update = flag.Bool("update", false, "rewrite golden files")

// fakeClock advances by step on every reading.
type fakeClock struct {
	mu   sync.Mutex
	now  time.Time
	step time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(c.step)
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// withoutTime drops the wall-clock time of each JSON line so records can be
// compared with a golden file; it also checks that the time was present.
func withoutTime(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	for _, l := range bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n")) {
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(l, &m), string(l))
		require.Contains(t, m, "time")
		// Re-encode by hand to keep the handler's field order.
		i := bytes.Index(l, []byte(`"level":`))
		require.Positive(t, i)
		out.WriteString("{")
		out.Write(l[i:])
		out.WriteString("\n")
	}
	return out.Bytes()
}

func TestRunnerGolden(t *testing.T) {
	start := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	clk := &fakeClock{now: start, step: 5 * time.Millisecond}
	var buf bytes.Buffer
	log := logging.New(&buf, slog.LevelInfo, "gatewayd")
	r := New("gateway", start, log, clk.Now)
	ctx := context.Background()

	require.NoError(t, r.Run(ctx, "model-probe", func(context.Context) error {
		clk.Advance(1200 * time.Millisecond)
		return nil
	}))
	require.NoError(t, r.Run(ctx, "runtime-assets", func(context.Context) error { return nil }))
	perr := fmt.Errorf("install: %w", FailCheck("plugin-install", codes.PluginNotReady, errors.New("plugin x at /home/node/p not ready")))
	require.ErrorIs(t, r.Run(ctx, "plugin-install", func(context.Context) error {
		clk.Advance(300 * time.Millisecond)
		return perr
	}), perr)
	plain := errors.New("open /etc/openclaw/openclaw.json: permission denied")
	require.ErrorIs(t, r.Run(ctx, "state-migration", func(context.Context) error { return plain }), plain)
	require.Error(t, r.Run(ctx, "codex-login", func(context.Context) error {
		return Fail("not a code", errors.New("x"))
	}))
	r.Record("peer-status-changed", OK, 0, codes.Unavailable) // code dropped: outcome ok
	r.Record("gateway-respawn", Failed, 4*time.Second, codes.Unavailable)
	r.Record("gateway-respawn", Failed, -time.Second, "") // negative durations clamp, no code

	got := withoutTime(t, buf.Bytes())
	golden := filepath.Join("testdata", "startup_phases.golden")
	if *update {
		require.NoError(t, os.WriteFile(golden, got, 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
	// Nothing but the allow-listed fields, and no path or error text.
	require.NotContains(t, buf.String(), "/home/node")
	require.NotContains(t, buf.String(), "permission denied")

	recs := r.Records()
	require.Len(t, recs, 8)
	require.Equal(t, Record{Phase: "model-probe", Outcome: OK, Ms: 1205, SinceStartMs: 1210}, recs[0])
	require.Equal(t, codes.PluginNotReady, recs[2].Code)
	require.Equal(t, codes.Unavailable, recs[3].Code)
	require.Equal(t, codes.Unavailable, recs[4].Code)
	require.Empty(t, recs[5].Code)
}

func TestRunnerObserverAndConcurrency(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	r := New("agent", time.Now(), nil, nil)
	r.Observe(func(rec Record) {
		mu.Lock()
		seen = append(seen, rec.Phase)
		mu.Unlock()
	})
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = r.Run(context.Background(), fmt.Sprintf("p%d", i), func(context.Context) error { return nil })
		}()
	}
	wg.Wait()
	require.Len(t, r.Records(), 16)
	require.Len(t, seen, 16)
	require.GreaterOrEqual(t, r.SinceStart(), time.Duration(0))
}

func TestRunPassesContext(t *testing.T) {
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "v")
	r := New("gateway", time.Now(), nil, nil)
	require.NoError(t, r.Run(ctx, "x", func(c context.Context) error {
		require.Equal(t, "v", c.Value(key{}))
		return nil
	}))
}

func TestCodedErrorHelpers(t *testing.T) {
	cause := codes.Cause{Kind: codes.CauseProcessExit, Detail: "exit-1"}
	e := FailCause(codes.ModelProbeFailed, cause, errors.New("probe exited"))
	wrapped := fmt.Errorf("phase: %w", e)
	require.Equal(t, codes.ModelProbeFailed, CodeOf(wrapped))
	require.Equal(t, &cause, CauseOf(wrapped))
	require.Equal(t, "model-probe", CheckOf(wrapped, "model-probe"))
	require.Equal(t, "MODEL_PROBE_FAILED (PROCESS_EXIT exit-1): probe exited", e.Error())
	var ce *CodedError
	require.True(t, errors.As(wrapped, &ce))
	require.Equal(t, "probe exited", errors.Unwrap(ce).Error())

	c := FailCheck("state-migration", codes.Unavailable, nil)
	require.Equal(t, "state-migration: UNAVAILABLE", c.Error())
	require.Equal(t, "state-migration", CheckOf(c, "x"))

	require.Equal(t, codes.Code(""), CodeOf(nil))
	require.Equal(t, codes.Unavailable, CodeOf(errors.New("x")))
	require.Equal(t, codes.Unavailable, CodeOf(Fail("bad", nil)))
	require.Nil(t, CauseOf(errors.New("x")))
	require.True(t, strings.HasPrefix(Fail(codes.LoginFailed, errors.New("e")).Error(), "LOGIN_FAILED"))
}

// TestObserveStart: the start observer sees each phase before it runs, so a
// status server can publish the phase running now.
func TestObserveStart(t *testing.T) {
	r := New("gateway", time.Now(), nil, nil)
	var started []string
	r.ObserveStart(func(p string) { started = append(started, p) })
	require.NoError(t, r.Run(context.Background(), "model-probe", func(context.Context) error {
		require.Equal(t, []string{"model-probe"}, started, "announced before the phase runs")
		return nil
	}))
	require.Error(t, r.Run(context.Background(), "configure", func(context.Context) error { return fmt.Errorf("x") }))
	require.Equal(t, []string{"model-probe", "configure"}, started)
}
