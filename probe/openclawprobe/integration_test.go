package openclawprobe

import (
	"bytes"
	"context"
	"log/slog"
	"oce.dev/oce/shared/logtest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/probe/fakeprovider"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/netns"
	"oce.dev/oce/shared/runtimes"
)

// These tests run the real openclaw 2026.9.6 CLI (several seconds per call)
// inside this binary's loopback-only namespace against the offline fake
// provider, configured as a custom provider baseUrl.

var (
	compileCacheOnce sync.Once
	compileCacheDir  string
)

// sharedCompileCache is one NODE_COMPILE_CACHE directory for every real run
// of this binary, so only the first pays for a cold compile.
func sharedCompileCache(t *testing.T) string {
	compileCacheOnce.Do(func() {
		d, err := os.MkdirTemp("", "oce-probe-compile-cache-")
		require.NoError(t, err)
		compileCacheDir = d
	})
	return compileCacheDir
}

type realRun struct {
	opts Options
	srv  *fakeprovider.Server
	logs *logtest.Buffer
}

func realSetup(t *testing.T, api string, fault fakeprovider.Fault) realRun {
	t.Helper()
	require.NoError(t, netns.Isolated(), "real OpenClaw runs only in the loopback-only namespace")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	paths, err := runtimes.Ensure(ctx)
	require.NoError(t, err)
	srv, err := fakeprovider.Start(ctx, fakeprovider.Options{Reply: "OK", ValidKeys: []string{plantedKey},
		Fault: fault, SlowInterval: time.Second, Log: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })

	cg := t.TempDir() // a fake cgroup root: one core, a CPU counter that stays put
	require.NoError(t, os.WriteFile(filepath.Join(cg, "cpu.max"), []byte("max 100000\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(cg, "cpu.pressure"),
		[]byte("some avg10=0.00 avg60=0.00 avg300=0.00 total=1000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"), 0o644))

	model, base := "openai/gpt-fake-1", srv.URL()+"/v1"
	if api == "anthropic-messages" {
		model, base = "anthropic/claude-fake-1", srv.URL()
	}
	_, id, _ := strings.Cut(model, "/")
	logs := &logtest.Buffer{}
	return realRun{srv: srv, logs: logs, opts: Options{
		Command: paths.OpenClawCommand(),
		Model:   model,
		ProviderSettings: map[string]any{"baseUrl": base, "api": api, "models": []any{map[string]any{
			"id": id, "name": id, "input": []any{"text"}, "contextWindow": 128000, "maxTokens": 4096}}},
		Credential:      plantedKey,
		TempDir:         t.TempDir(),
		CompileCacheDir: sharedCompileCache(t),
		CgroupRoot:      cg,
		Logger:          slog.New(slog.NewJSONHandler(logs, nil)),
	}}
}

// childWatch samples /proc while a probe runs and records, for every
// process whose argv is the probe's, whether the key shows in its argv and
// whether its environment holds it.
type childWatch struct {
	mu      sync.Mutex
	seen    int
	argvKey bool
	envKey  bool
	stop    chan struct{}
	done    chan struct{}
}

func watchChildren() *childWatch {
	w := &childWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			w.sample()
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *childWatch) sample() {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmd, []byte("--probe-max-tokens")) {
			continue
		}
		env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		w.mu.Lock()
		w.seen++
		w.argvKey = w.argvKey || bytes.Contains(cmd, []byte(plantedKey))
		w.envKey = w.envKey || bytes.Contains(env, []byte(plantedKey))
		w.mu.Unlock()
	}
}

func (w *childWatch) finish() (seen int, argvKey, envKey bool) {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen, w.argvKey, w.envKey
}

func requireClean(t *testing.T, r realRun) {
	t.Helper()
	all := r.logs.String()
	require.Contains(t, all, `"msg":"`+EventResult+`"`)
	for _, s := range []string{plantedKey, "gpt-fake-1", "claude-fake-1", "127.0.0.1", r.opts.TempDir} {
		require.NotContains(t, all, s)
	}
	ents, err := os.ReadDir(r.opts.TempDir)
	require.NoError(t, err)
	require.Empty(t, ents, "the probe's temp dir is removed")
}

// READY through the real CLI, for both OpenAI adapters and Anthropic. The
// key is in the probe child's environment (it owns model access) and never
// in its argv or the log.
func TestRealReady(t *testing.T) {
	for _, api := range []string{"openai-completions", "openai-responses", "anthropic-messages"} {
		t.Run(api, func(t *testing.T) {
			r := realSetup(t, api, fakeprovider.FaultNone)
			w := watchChildren()
			res := Run(context.Background(), r.opts)
			seen, argvKey, envKey := w.finish()
			require.Equal(t, codes.Ready, res.Code, "cause %+v err %v", res.Cause, res.Err)
			require.Equal(t, 65*time.Second, res.Cap)
			require.GreaterOrEqual(t, r.srv.Requests(), int64(1))
			require.Positive(t, seen, "the probe child was observed")
			require.False(t, argvKey, "key in a probe child's argv")
			require.True(t, envKey, "the probe child owns model access through its environment")
			requireClean(t, r)
		})
	}
}

// A key the provider rejects (401) is AUTHENTICATION_FAILED.
func TestRealAuthenticationFailed(t *testing.T) {
	r := realSetup(t, "openai-completions", fakeprovider.FaultNone)
	r.opts.Credential = "sk-wrong-key-0000"
	res := Run(context.Background(), r.opts)
	require.Equal(t, codes.AuthenticationFailed, res.Code, "cause %+v err %v", res.Cause, res.Err)
	require.GreaterOrEqual(t, r.srv.Requests(), int64(1))
	require.NotContains(t, r.logs.String(), "sk-wrong-key-0000")
	requireClean(t, r)
}

// OpenClaw 2026.9.6's embedded runner retries a failed model call itself
// (failover-retry-controller.ts): at most 8 retries of a server error, 9 of a
// rate limit, each after a jittered delay of 0.5–1.5 × 1, 2, 4, 8, 16, 30, 30…
// seconds (at most 30 s), and a server error only while the delay fits a
// 90 s window from the first failure. So it cannot give up on a 500 sooner
// than 60 s after its first request (until then the window holds any delay,
// and the 8 smallest delays sum to 60.5 s), nor on a 429 with Retry-After: 1
// sooner than 76 s (9 delays of at least max(jitter, 1 s); no window). Later
// it may stop on its own (docs/protocol-openclaw-probe.md), so these tests
// choose caps that end the probe first whatever the jitter draws.

// A provider that always fails, under caps that end the CLI's retries:
// MODEL_PROBE_TIMEOUT (the CPU counter stays put, so not CPU-starved).
//   - 500 under an injected 40 s cap. At the seed's 65 s the CLI's own end
//     (status rate_limit, the fake's "high demand" message being an
//     overload) can come first.
//   - 429 under the seed's cap for one core, 65 s: hit, not only computed.
func TestRealRetriesEndAtTheCap(t *testing.T) {
	for _, tc := range []struct {
		fault   fakeprovider.Fault
		inject  time.Duration // 0: the production cap
		wantCap time.Duration
	}{
		{fakeprovider.Fault500, 40 * time.Second, 40 * time.Second},
		{fakeprovider.Fault429, 0, 65 * time.Second},
	} {
		t.Run(string(tc.fault), func(t *testing.T) {
			r := realSetup(t, "openai-completions", tc.fault)
			r.opts.Cap = tc.inject
			res := Run(context.Background(), r.opts)
			require.Equal(t, codes.ModelProbeTimeout, res.Code, "cause %+v err %v", res.Cause, res.Err)
			require.Equal(t, tc.wantCap, res.Cap)
			require.GreaterOrEqual(t, res.Elapsed, tc.wantCap)
			require.GreaterOrEqual(t, r.srv.Requests(), int64(2), "the CLI retried the %s", tc.fault)
			requireClean(t, r)
		})
	}
}

// A provider that streams too slowly (one delta a second, 120 deltas) ends
// in MODEL_PROBE_TIMEOUT under an injected cap shorter than the seed's.
func TestRealSlowProviderTimeout(t *testing.T) {
	r := realSetup(t, "openai-completions", fakeprovider.FaultSlow)
	r.opts.Cap = 50 * time.Second
	res := Run(context.Background(), r.opts)
	t.Logf("slow provider: elapsed %v of cap %v", res.Elapsed, res.Cap)
	require.Equal(t, codes.ModelProbeTimeout, res.Code, "cause %+v err %v", res.Cause, res.Err)
	require.NotNil(t, res.CPUWaitMs)
	require.Equal(t, int64(0), *res.CPUWaitMs)
	require.GreaterOrEqual(t, r.srv.Requests(), int64(1), "the model call was under way")
	requireClean(t, r)
}

// The cap kills the real CLI's whole process group (openclaw.mjs re-spawns
// itself under NODE_COMPILE_CACHE, so there are two node processes): after
// Run returns no probe process is left.
func TestRealCapKillsGroup(t *testing.T) {
	r := realSetup(t, "openai-completions", fakeprovider.FaultNone)
	r.opts.Cap = 3 * time.Second
	w := watchChildren()
	res := Run(context.Background(), r.opts)
	seen, _, _ := w.finish()
	require.Equal(t, codes.ModelProbeTimeout, res.Code, "cause %+v err %v", res.Cause, res.Err)
	require.GreaterOrEqual(t, res.Elapsed, 3*time.Second)
	require.Positive(t, seen)
	left := watchChildren()
	n, _, _ := left.finish()
	require.Zero(t, n, "no probe process survives the cap")
	requireClean(t, r)
}
