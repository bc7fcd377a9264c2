package openclawprobe

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"oce.dev/oce/shared/logtest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/netns"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == fakeArg {
		os.Exit(fakeOpenClaw(os.Args[2:]))
	}
	// The integration tests start the real OpenClaw: loopback-only network
	// and a private /tmp for the whole binary.
	netns.Main(m, netns.Options{PrivateTmp: true})
}

// plantedKey must never reach a log record or a probe child's argv.
const plantedKey = "sk-planted-0123456789abcdef-SECRET"

type fakeRun struct {
	opts   Options
	report string
	cgroup string
	logs   *logtest.Buffer
}

// fakeSetup returns options that run the fake CLI in scenario, with a fake
// cgroup root whose CPU wait counter starts at zero.
func fakeSetup(t *testing.T, scenario string) fakeRun {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cg := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(cg, "cpu.max"), []byte("max 100000\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(cg, "cpu.pressure"),
		[]byte("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"), 0o644))
	rep := filepath.Join(t.TempDir(), "report.json")
	logs := &logtest.Buffer{}
	return fakeRun{
		opts: Options{
			Command:    []string{exe, fakeArg, scenario, rep, cg},
			Model:      "openai/gpt-fake-1",
			Credential: plantedKey,
			TempDir:    t.TempDir(),
			CgroupRoot: cg,
			Cap:        30 * time.Second,
			Logger:     slog.New(slog.NewJSONHandler(logs, nil)),
		},
		report: rep, cgroup: cg, logs: logs,
	}
}

func (f fakeRun) readReport(t *testing.T) fakeReport {
	t.Helper()
	b, err := os.ReadFile(f.report)
	require.NoError(t, err)
	var r fakeReport
	require.NoError(t, json.Unmarshal(b, &r))
	return r
}

func cause(kind codes.CauseKind, detail string) *codes.Cause {
	return &codes.Cause{Kind: kind, Detail: detail}
}

// Every row of the result mapping that a process outcome can produce.
func TestResultMapping(t *testing.T) {
	cases := []struct {
		scenario string
		code     codes.Code
		cause    *codes.Cause
	}{
		{"ok", codes.Ready, nil},
		{"auth", codes.AuthenticationFailed, nil},
		{"timeout", codes.ModelProbeTimeout, nil},
		{"format", codes.ModelProbeFailed, cause(codes.CauseProbeStatus, "format")},
		{"rate_limit", codes.ModelProbeFailed, cause(codes.CauseProbeStatus, "rate_limit")},
		{"billing", codes.ModelProbeFailed, cause(codes.CauseProbeStatus, "billing")},
		{"unknown", codes.ModelProbeFailed, cause(codes.CauseProbeStatus, "unknown")},
		{"no_model", codes.ModelProbeFailed, cause(codes.CauseProbeStatus, "no_model")},
		{"weird", codes.ModelProbeFailed, cause(codes.CauseProbeStatus, "other")},
		{"exit3", codes.ModelProbeFailed, cause(codes.CauseProcessExit, "exit-3")},
		{"sigterm", codes.ModelProbeFailed, cause(codes.CauseProcessExit, "signal-SIGTERM")},
		{"not-json", codes.ModelProbeFailed, cause(codes.CauseInvalidOutput, "json")},
		{"two-docs", codes.ModelProbeFailed, cause(codes.CauseInvalidOutput, "json")},
		{"array", codes.ModelProbeFailed, cause(codes.CauseInvalidOutput, "shape")},
		{"no-probes", codes.ModelProbeFailed, cause(codes.CauseInvalidOutput, "shape")},
		{"no-results", codes.ModelProbeFailed, cause(codes.CauseInvalidOutput, "shape")},
		{"other-provider", codes.ModelProbeFailed, cause(codes.CauseInvalidOutput, "shape")},
		{"status-number", codes.ModelProbeFailed, cause(codes.CauseInvalidOutput, "shape")},
		{"flood", codes.ModelProbeFailed, cause(codes.CauseProcessExit, "error-ERR_CHILD_PROCESS_STDIO_MAXBUFFER")},
	}
	for _, tc := range cases {
		t.Run(tc.scenario, func(t *testing.T) {
			f := fakeSetup(t, tc.scenario)
			res := Run(context.Background(), f.opts)
			require.Equal(t, tc.code, res.Code, "err: %v", res.Err)
			require.Equal(t, tc.cause, res.Cause)
			require.True(t, codes.IsProbe(res.Code))
			require.Equal(t, 30*time.Second, res.Cap)
			require.NotNil(t, res.CPUWaitMs)
			require.Equal(t, int64(0), *res.CPUWaitMs)
			if res.Cause != nil {
				require.True(t, codes.IsCauseKind(res.Cause.Kind))
			}
			require.Less(t, res.Elapsed, 30*time.Second)
			// The fake ran, so a report exists; the temp dir is gone.
			rep := f.readReport(t)
			require.NoDirExists(t, rep.Cwd)
		})
	}
}

// The cap: a hung probe with an idle CPU counter is a timeout; one whose
// counter advanced past a quarter of the elapsed time is CPU-starved.
func TestCapTimeoutVersusStarved(t *testing.T) {
	for _, tc := range []struct {
		scenario string
		code     codes.Code
	}{
		{"hang", codes.ModelProbeTimeout},
		{"starve", codes.ModelProbeCPUStarved},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			f := fakeSetup(t, tc.scenario)
			f.opts.Cap = time.Second
			start := time.Now()
			res := Run(context.Background(), f.opts)
			require.Equal(t, tc.code, res.Code, "err: %v", res.Err)
			require.Nil(t, res.Cause)
			require.GreaterOrEqual(t, res.Elapsed, time.Second)
			require.Less(t, time.Since(start), 20*time.Second, "the group was killed at the cap")
			require.NotNil(t, res.CPUWaitMs)
			if tc.code == codes.ModelProbeCPUStarved {
				require.Equal(t, int64(900_000), *res.CPUWaitMs)
			} else {
				require.Equal(t, int64(0), *res.CPUWaitMs)
			}
			rep := f.readReport(t)
			require.ErrorIs(t, syscall.Kill(rep.Pid, 0), syscall.ESRCH, "probe process is gone")
		})
	}
}

// Without a readable counter the wait is null and a cap hit is a timeout.
func TestCapWithoutCounter(t *testing.T) {
	f := fakeSetup(t, "hang")
	require.NoError(t, os.Remove(filepath.Join(f.cgroup, "cpu.pressure")))
	f.opts.Cap = 500 * time.Millisecond
	res := Run(context.Background(), f.opts)
	require.Equal(t, codes.ModelProbeTimeout, res.Code)
	require.Nil(t, res.CPUWaitMs)
	final := f.logs.Records(t)
	last := final[len(final)-1]
	require.Contains(t, last, "cpuWaitMs")
	require.Nil(t, last["cpuWaitMs"], "null in the record")
}

// The cap defaults to the seed formula for the cgroup's cpu.max.
func TestDefaultCapFromQuota(t *testing.T) {
	f := fakeSetup(t, "ok")
	f.opts.Cap = 0
	require.NoError(t, os.WriteFile(filepath.Join(f.cgroup, "cpu.max"), []byte("50000 100000\n"), 0o644))
	res := Run(context.Background(), f.opts)
	require.Equal(t, codes.Ready, res.Code)
	require.Equal(t, 110*time.Second, res.Cap)
	require.Equal(t, 65*time.Second, CapFor(t.TempDir()), "no cpu.max counts as one core")
}

// A helper the probe leaves behind holding stdout is killed with the group.
func TestGroupKilledAfterExit(t *testing.T) {
	f := fakeSetup(t, "grandchild")
	start := time.Now()
	res := Run(context.Background(), f.opts)
	require.Equal(t, codes.Ready, res.Code, "err: %v", res.Err)
	require.Less(t, time.Since(start), 20*time.Second)
	rep := f.readReport(t)
	require.NotZero(t, rep.ChildPid)
	require.Eventually(t, func() bool {
		return errors.Is(syscall.Kill(rep.ChildPid, 0), syscall.ESRCH) || isZombie(rep.ChildPid)
	}, 10*time.Second, 20*time.Millisecond)
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", itoa(pid), "stat"))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && len(s) > i+2 && s[i+2] == 'Z'
}

func itoa(n int) string { return strconv.Itoa(n) }

// The child gets exactly the minimal environment, its own process group, a
// private 0600 config and the probe flags; the key is in its environment
// (it owns model access) but not in its argv.
func TestChildEnvironmentAndConfig(t *testing.T) {
	f := fakeSetup(t, "ok")
	f.opts.NodeExtraCACerts = "/etc/ssl/extra.pem"
	f.opts.SSLCertFile = "/etc/ssl/cert.pem"
	f.opts.CompileCacheDir = "/var/cache/oce/node-compile-cache/probe"
	f.opts.Path = "/usr/bin:/bin"
	f.opts.ProviderSettings = map[string]any{
		"baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions", "apiKey": "sk-config-key-must-go",
		"agentRuntime": map[string]any{"id": "codex"},
		"models":       []any{map[string]any{"id": "gpt-fake-1", "agentRuntime": map[string]any{"id": "codex"}}},
	}
	t.Setenv("OCE_PROBE_UNRELATED", "leak")
	res := Run(context.Background(), f.opts)
	require.Equal(t, codes.Ready, res.Code, "err: %v", res.Err)
	rep := f.readReport(t)

	env := map[string]string{}
	var keys []string
	for _, kv := range rep.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
		keys = append(keys, k)
	}
	sort.Strings(keys)
	require.Equal(t, []string{"HOME", "NODE_COMPILE_CACHE", "NODE_EXTRA_CA_CERTS", "OPENAI_API_KEY",
		"OPENCLAW_CONFIG_PATH", "OPENCLAW_DISABLE_BONJOUR", "OPENCLAW_NO_AUTO_UPDATE", "OPENCLAW_SKIP_CHANNELS",
		"OPENCLAW_STATE_DIR", "PATH", "SSL_CERT_FILE", "TMPDIR"}, keys)
	require.Equal(t, plantedKey, env["OPENAI_API_KEY"])
	require.Equal(t, "/usr/bin:/bin", env["PATH"])
	require.Equal(t, "/var/cache/oce/node-compile-cache/probe", env["NODE_COMPILE_CACHE"])
	for _, k := range []string{"HOME", "TMPDIR", "OPENCLAW_STATE_DIR", "OPENCLAW_CONFIG_PATH"} {
		require.True(t, strings.HasPrefix(env[k], rep.Cwd+"/"), "%s under the private temp dir", k)
	}
	require.Equal(t, f.opts.TempDir, filepath.Dir(rep.Cwd))
	require.NoDirExists(t, rep.Cwd, "temp dir removed")

	require.Equal(t, rep.Pid, rep.Pgid, "own process group")
	require.NotContains(t, rep.Cmdline, plantedKey)
	require.Equal(t, []string{"models", "status", "--json", "--probe", "--probe-provider", "openai",
		"--probe-concurrency", "1", "--probe-timeout", "15000", "--probe-max-tokens", "256"}, rep.Args)

	require.Empty(t, rep.ConfigErr)
	require.Equal(t, uint32(0o600), rep.ConfigMod)
	require.NotContains(t, rep.Config, plantedKey)
	require.NotContains(t, rep.Config, "sk-config-key-must-go")
	require.NotContains(t, rep.Config, `"codex"`)
	var cfg map[string]any
	require.NoError(t, json.Unmarshal([]byte(rep.Config), &cfg))
	get := func(path ...string) any {
		var v any = cfg
		for _, p := range path {
			m, ok := v.(map[string]any)
			require.True(t, ok, "%v", path)
			v = m[p]
		}
		return v
	}
	require.Equal(t, "openai/gpt-fake-1", get("agents", "defaults", "model", "primary"))
	require.Equal(t, []any{}, get("agents", "defaults", "model", "fallbacks"))
	require.Equal(t, "openclaw", get("agents", "defaults", "models", "openai/gpt-fake-1", "agentRuntime", "id"))
	require.Equal(t, "openclaw", get("models", "providers", "openai", "agentRuntime", "id"))
	require.Equal(t, "http://127.0.0.1:9/v1", get("models", "providers", "openai", "baseUrl"))
	require.Equal(t, false, get("models", "catalogRefresh", "enabled"))
	require.Equal(t, false, get("update", "checkOnStart"))
	require.Equal(t, "off", get("discovery", "mdns", "mode"))
	require.Equal(t, []any{"*"}, get("tools", "deny"))
	require.True(t, strings.HasPrefix(get("logging", "file").(string), rep.Cwd+"/"))
}

// An Anthropic model hands the key over as ANTHROPIC_API_KEY only.
func TestAnthropicCredentialVariable(t *testing.T) {
	f := fakeSetup(t, "anthropic-ok")
	f.opts.Model = "anthropic/claude-haiku-4-5"
	res := Run(context.Background(), f.opts)
	require.Equal(t, codes.Ready, res.Code, "err: %v", res.Err)
	rep := f.readReport(t)
	require.Contains(t, rep.Env, "ANTHROPIC_API_KEY="+plantedKey)
	for _, kv := range rep.Env {
		require.False(t, strings.HasPrefix(kv, "OPENAI_API_KEY="))
	}
	require.Contains(t, rep.Args, "anthropic")
}

// Failures before the probe runs are UNAVAILABLE and start nothing.
func TestUnavailableBeforeSpawn(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Options)
		want   error
	}{
		{"no command", func(o *Options) { o.Command = nil }, ErrNoCommand},
		{"model without provider", func(o *Options) { o.Model = "gpt-fake-1" }, ErrModel},
		{"provider without credential variable", func(o *Options) { o.Model = "vllm/llama" }, ErrProvider},
		{"no credential", func(o *Options) { o.Credential = "" }, ErrNoCredential},
		{"env substitution in settings", func(o *Options) {
			o.ProviderSettings = map[string]any{"baseUrl": "${PROXY_URL}/v1"}
		}, ErrProviderSettings},
		{"secret ref in settings", func(o *Options) {
			o.ProviderSettings = map[string]any{"headers": map[string]any{
				"X-Key": map[string]any{"source": "env", "provider": "default", "id": "X_KEY"}}}
		}, ErrProviderSettings},
		{"temp dir parent missing", func(o *Options) { o.TempDir = "/nonexistent/oce-probe" }, os.ErrNotExist},
		{"runtime missing", func(o *Options) { o.Command = []string{"/nonexistent/node", "/nonexistent/openclaw.mjs"} }, os.ErrNotExist},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := fakeSetup(t, "ok")
			tc.mutate(&f.opts)
			res := Run(context.Background(), f.opts)
			require.Equal(t, codes.Unavailable, res.Code)
			require.ErrorIs(t, res.Err, tc.want)
			require.Nil(t, res.Cause)
			require.Zero(t, res.Elapsed)
			require.NoFileExists(t, f.report, "nothing was spawned")
			entries, err := os.ReadDir(f.opts.TempDir)
			if err == nil {
				require.Empty(t, entries, "no temp dir left behind")
			}
			var stages []string
			for _, r := range f.logs.Records(t) {
				if r["msg"] == EventStage {
					stages = append(stages, r["stage"].(string))
				}
			}
			require.NotContains(t, stages, StageSpawn)
			require.Equal(t, StagePrepare, stages[0])
			require.Equal(t, StageComplete, stages[len(stages)-1])
		})
	}
}

// A spawn error carries its errno.
func TestSpawnErrno(t *testing.T) {
	f := fakeSetup(t, "ok")
	bad := filepath.Join(t.TempDir(), "node")
	require.NoError(t, os.WriteFile(bad, []byte{0x7f, 'X', 0, 0, 1, 2, 3}, 0o755))
	f.opts.Command = []string{bad}
	res := Run(context.Background(), f.opts)
	require.Equal(t, codes.ModelProbeFailed, res.Code)
	require.Equal(t, cause(codes.CauseProcessExit, "error-ENOEXEC"), res.Cause)
}

// Cancelling the caller's context kills the probe and reports UNAVAILABLE.
func TestCancelled(t *testing.T) {
	f := fakeSetup(t, "hang")
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		require.Eventually(t, func() bool { _, err := os.Stat(f.report); return err == nil },
			10*time.Second, 10*time.Millisecond)
		cancel()
	}()
	res := Run(ctx, f.opts)
	require.Equal(t, codes.Unavailable, res.Code)
	require.ErrorIs(t, res.Err, context.Canceled)
	rep := f.readReport(t)
	require.ErrorIs(t, syscall.Kill(rep.Pid, 0), syscall.ESRCH)
}

// The log carries the six stages in order and one result record with only
// the allow-listed fields: no provider, model, credential or path.
func TestLogRecords(t *testing.T) {
	for _, tc := range []struct {
		scenario string
		fields   []string
	}{
		{"ok", []string{"capMs", "code", "cpuWaitMs", "elapsedMs", "event", "level", "msg", "time"}},
		{"billing", []string{"capMs", "causeDetail", "causeKind", "code", "cpuWaitMs", "elapsedMs", "event", "level", "msg", "time"}},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			f := fakeSetup(t, tc.scenario)
			res := Run(context.Background(), f.opts)
			recs := f.logs.Records(t)
			var stages []string
			for _, r := range recs[:len(recs)-1] {
				require.Equal(t, EventStage, r["msg"])
				require.Equal(t, EventStage, r["event"])
				var keys []string
				for k := range r {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				require.Equal(t, []string{"event", "level", "msg", "stage", "time"}, keys)
				stages = append(stages, r["stage"].(string))
			}
			require.Equal(t, []string{StagePrepare, StagePreflight, StageSpawn, StageReturned, StageCleanup, StageComplete}, stages)
			last := recs[len(recs)-1]
			var keys []string
			for k := range last {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			require.Equal(t, tc.fields, keys)
			require.Equal(t, EventResult, last["msg"])
			require.Equal(t, string(res.Code), last["code"])
			require.Equal(t, float64(30000), last["capMs"])
			if res.Cause != nil {
				require.Equal(t, string(res.Cause.Kind), last["causeKind"])
				require.Equal(t, res.Cause.Detail, last["causeDetail"])
			}
			all := f.logs.String()
			for _, s := range []string{plantedKey, "openai", "gpt-fake-1", f.opts.TempDir, "/tmp", "sk-"} {
				require.NotContains(t, all, s)
			}
		})
	}
}

func FuzzParseStatus(f *testing.F) {
	f.Add(realStatusOK, "openai")
	f.Add([]byte(`{"auth":{"probes":{"results":[{"provider":"openai","status":"auth"}]}}}`), "openai")
	f.Add([]byte(`{"auth":null}`), "openai")
	f.Add([]byte(`not json`), "anthropic")
	f.Fuzz(func(t *testing.T, out []byte, provider string) {
		status, invalid := parseStatus(out, provider)
		if invalid != "" {
			require.Contains(t, []string{detailJSON, detailShape}, invalid)
			require.Empty(t, status)
			return
		}
		r := statusResult(status)
		require.True(t, codes.IsProbe(r.Code))
		if r.Code == codes.ModelProbeFailed {
			require.Equal(t, codes.CauseProbeStatus, r.Cause.Kind)
		}
	})
}

// BenchmarkParseStatus parses the real CLI's output (about 2.7 KB).
func BenchmarkParseStatus(b *testing.B) {
	for b.Loop() {
		if s, bad := parseStatus(realStatusOK, "openai"); s != "ok" || bad != "" {
			b.Fatal(s, bad)
		}
	}
	b.ReportMetric(float64(len(realStatusOK)), "bytes/doc")
}

// BenchmarkFakeProbe is one whole probe against the fake CLI: temp dir,
// config, spawn in a process group, read, classify, cleanup. It is the
// wrapper's own cost next to the real CLI's 7–30 s.
func BenchmarkFakeProbe(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cg := b.TempDir()
	rep := filepath.Join(b.TempDir(), "report.json")
	o := Options{Command: []string{exe, fakeArg, "ok", rep, cg}, Model: "openai/gpt-fake-1",
		Credential: plantedKey, TempDir: b.TempDir(), CgroupRoot: cg, Cap: time.Minute}
	for b.Loop() {
		if r := Run(context.Background(), o); r.Code != codes.Ready {
			b.Fatal(r.Code, r.Err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/probe")
}

// With CompileCacheBase the probe's $TMPDIR/node-compile-cache (the
// launcher's default base) is that cache, so the probe shares the caller's
// compile cache; cleaning up removes the link, never the cache.
func TestProbeSharesCompileCache(t *testing.T) {
	cache := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(cache, "entry"), []byte("x"), 0o644))
	r := newRun(Options{Command: []string{"node", "openclaw.mjs"}, Model: "openai/gpt-fake-1", Credential: "sk-x",
		TempDir: t.TempDir(), CompileCacheBase: cache})
	dir, env, _, err := r.prepare()
	require.NoError(t, err)
	link := filepath.Join(dir, "tmp", "node-compile-cache")
	target, err := os.Readlink(link)
	require.NoError(t, err)
	require.Equal(t, cache, target)
	require.Contains(t, env, "TMPDIR="+filepath.Join(dir, "tmp"))
	for _, kv := range env {
		require.NotContains(t, kv, "NODE_COMPILE_CACHE=", "the launcher would re-spawn itself")
	}
	require.NoError(t, os.RemoveAll(dir))
	require.FileExists(t, filepath.Join(cache, "entry"))
}
