package codexprobe

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"oce.dev/oce/shared/logtest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/netns"
)

func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "codex" {
		os.Exit(fakeCodexMain())
	}
	// The integration tests start the real Codex: the whole binary runs in a
	// loopback-only namespace with a private /tmp.
	netns.Main(m, netns.Options{PrivateTmp: true})
}

const planted = "sk-PLANTED-codexprobe-secret-9f8e7d"

func newJSONLogger(b *logtest.Buffer) *slog.Logger { return slog.New(slog.NewJSONHandler(b, nil)) }

// fakeSetup makes a CODEX_HOME with the scenarios and a config running the fake codex.
func fakeSetup(t *testing.T, scenarios ...string) (Config, *logtest.Buffer) {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "codex")
	require.NoError(t, os.Symlink(exe, bin))
	home := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(home, "fake-scenario"), []byte(strings.Join(scenarios, "\n")), 0o600))
	logs := &logtest.Buffer{}
	return Config{
		Codex:      bin,
		CodexHome:  home,
		TmpDir:     t.TempDir(),
		Model:      "openai/gpt-6-sol",
		Provider:   &Provider{Name: "oce", BaseURL: "http://127.0.0.1:9/v1", RequiresOpenAIAuth: true},
		Log:        newJSONLogger(logs),
		AttemptCap: 30 * time.Second,
		Jitter:     func() time.Duration { return 10 * time.Millisecond },
	}, logs
}

func calls(t *testing.T, home string) []fakeCall {
	t.Helper()
	var out []fakeCall
	for i := 1; ; i++ {
		b, err := os.ReadFile(filepath.Join(home, "fake-call-"+itoa(i)+".json"))
		if err != nil {
			return out
		}
		var c fakeCall
		require.NoError(t, json.Unmarshal(b, &c))
		out = append(out, c)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestOutcomes(t *testing.T) {
	type want struct {
		code     codes.Code
		kind     codes.CauseKind
		detail   string
		class    codes.FailureClass
		attempts int
	}
	cases := []struct {
		scenarios []string
		want      want
	}{
		{[]string{"success"}, want{codes.Ready, "", "", "", 1}},
		{[]string{"success-warning"}, want{codes.Ready, "", "", "", 1}},
		{[]string{"reconnect"}, want{codes.Ready, "", "", "", 1}},
		{[]string{"auth401"}, want{codes.AuthenticationFailed, "", "", codes.ClassAuth, 1}},
		{[]string{"auth403"}, want{codes.AuthenticationFailed, "", "", codes.ClassAuth, 1}},
		{[]string{"http500", "http500"}, want{codes.ModelProbeFailed, codes.CauseCodexOutcome, DetailTurnFailed, codes.ClassServer, 2}},
		{[]string{"http500", "success"}, want{codes.Ready, "", "", "", 2}},
		{[]string{"failed", "failed"}, want{codes.ModelProbeFailed, codes.CauseCodexOutcome, DetailTurnFailed, codes.ClassNetwork, 2}},
		{[]string{"drop", "success"}, want{codes.Ready, "", "", "", 2}},
		{[]string{"refused", "refused"}, want{codes.ModelProbeFailed, codes.CauseCodexOutcome, DetailTurnFailed, codes.ClassNetwork, 2}},
		{[]string{"http500", "auth401"}, want{codes.AuthenticationFailed, "", "", codes.ClassAuth, 2}},
		{[]string{"ratelimit", "success"}, want{codes.ModelProbeFailed, codes.CauseCodexOutcome, DetailTurnFailed, codes.ClassRateLimit, 1}},
		{[]string{"tls", "success"}, want{codes.ModelProbeFailed, codes.CauseCodexOutcome, DetailTurnFailed, codes.ClassTLS, 1}},
		{[]string{"missingkey", "success"}, want{codes.ModelProbeFailed, codes.CauseCodexOutcome, DetailTurnFailed, codes.ClassConfig, 1}},
		{[]string{"tool", "success"}, want{codes.ModelProbeFailed, codes.CauseCodexOutcome, DetailToolEvent, codes.ClassTool, 1}},
		{[]string{"noreply", "success"}, want{codes.ModelProbeFailed, codes.CauseCodexOutcome, DetailNoReply, codes.ClassProtocol, 1}},
		{[]string{"emptyreply"}, want{codes.ModelProbeFailed, codes.CauseCodexOutcome, DetailNoReply, codes.ClassProtocol, 1}},
		{[]string{"unexpected"}, want{codes.ModelProbeFailed, codes.CauseCodexOutcome, DetailUnexpectedEvent, codes.ClassProtocol, 1}},
		{[]string{"twoturns"}, want{codes.ModelProbeFailed, codes.CauseCodexOutcome, DetailUnexpectedEvent, codes.ClassProtocol, 1}},
		{[]string{"garbage"}, want{codes.ModelProbeFailed, codes.CauseCodexOutcome, DetailUnexpectedEvent, codes.ClassProtocol, 1}},
		{[]string{"errorevent"}, want{codes.ModelProbeFailed, codes.CauseCodexOutcome, DetailErrorEvent, codes.ClassUnknown, 1}},
		{[]string{"dropexit", "dropexit"}, want{codes.ModelProbeFailed, codes.CauseCodexOutcome, DetailErrorEvent, codes.ClassNetwork, 2}},
		{[]string{"exit2", "success"}, want{codes.ModelProbeFailed, codes.CauseProcessExit, "exit-2", codes.ClassUnknown, 1}},
		{[]string{"sigkill", "success"}, want{codes.Ready, "", "", "", 2}},
		{[]string{"sigkill", "sigkill"}, want{codes.ModelProbeFailed, codes.CauseProcessExit, "signal-SIGKILL", codes.ClassKilled, 2}},
		{[]string{"sigsegv", "success"}, want{codes.ModelProbeFailed, codes.CauseProcessExit, "signal-SIGSEGV", codes.ClassUnknown, 1}},
		{[]string{"hang", "success"}, want{codes.Ready, "", "", "", 2}},
		{[]string{"hang", "hang"}, want{codes.ModelProbeTimeout, "", "", codes.ClassTimeout, 2}},
		{[]string{"hang", "http500"}, want{codes.ModelProbeFailed, codes.CauseCodexOutcome, DetailTurnFailed, codes.ClassServer, 2}},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.scenarios, "-then-"), func(t *testing.T) {
			cfg, logs := fakeSetup(t, c.scenarios...)
			// Only "hang" needs the cap to fire; elsewhere a generous cap
			// keeps a loaded machine (or -race) from turning runs into timeouts.
			cfg.AttemptCap = 30 * time.Second
			if slices.Contains(c.scenarios, "hang") {
				cfg.AttemptCap = 3 * time.Second
			}
			r, err := Run(t.Context(), cfg)
			require.NoError(t, err)
			require.Equal(t, c.want.code, r.Code)
			require.Equal(t, c.want.class, r.FailureClass)
			require.Equal(t, c.want.attempts, r.Attempts)
			if c.want.kind == "" {
				require.Nil(t, r.Cause)
			} else {
				require.Equal(t, &codes.Cause{Kind: c.want.kind, Detail: c.want.detail}, r.Cause)
			}
			require.Len(t, calls(t, cfg.CodexHome), c.want.attempts, "codex processes started")
			recs := logs.Records(t)
			require.Len(t, recs, c.want.attempts, "one record per attempt")
			for i, rec := range recs {
				require.Equal(t, LogEvent, rec["msg"])
				require.EqualValues(t, i+1, rec["attempt"])
			}
			last := recs[len(recs)-1]
			require.Equal(t, string(c.want.code), last["code"])
			if c.want.code != codes.Ready {
				require.Equal(t, string(c.want.class), last["failureClass"])
			}
			if c.want.kind != "" {
				require.Equal(t, string(c.want.kind), last["causeKind"])
				require.Equal(t, c.want.detail, last["causeDetail"])
			}
			assertNoLeak(t, logs.String())
		})
	}
}

// assertNoLeak checks a log holds no provider text, secret, path or model.
func assertNoLeak(t *testing.T, out string) {
	t.Helper()
	for _, s := range []string{planted, "sk-PLANTED", "Unauthorized", "high demand", "stream disconnected",
		"Connection failed", "127.0.0.1", "gpt-6-sol", "/tmp", "fake failure", "certificate", "vendor/"} {
		require.NotContains(t, out, s)
	}
	allowed := map[string]bool{"time": true, "level": true, "msg": true, "attempt": true, "elapsedMs": true,
		"exitCode": true, "signal": true, "code": true, "failureClass": true, "retry": true,
		"causeKind": true, "causeDetail": true}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m))
		for k := range m {
			require.True(t, allowed[k], "unexpected log field %q", k)
		}
	}
}

func TestTimeoutKillsWholeGroup(t *testing.T) {
	cfg, logs := fakeSetup(t, "hang", "hang")
	cfg.AttemptCap = 3 * time.Second
	r, err := Run(t.Context(), cfg)
	require.NoError(t, err)
	require.Equal(t, codes.ModelProbeTimeout, r.Code)
	require.Equal(t, 2, r.Attempts)
	cs := calls(t, cfg.CodexHome)
	require.Len(t, cs, 2)
	for _, c := range cs {
		requireGone(t, c.Child) // the grandchild died with its group
		require.Error(t, syscall.Kill(c.Pid, 0))
	}
	for _, rec := range logs.Records(t) {
		require.Equal(t, "SIGKILL", rec["signal"])
		require.Nil(t, rec["exitCode"])
		require.Equal(t, "MODEL_PROBE_TIMEOUT", rec["code"])
	}
}

func TestBudgetLeavesNoRoomForRetry(t *testing.T) {
	cfg, _ := fakeSetup(t, "hang", "success")
	cfg.AttemptCap = 400 * time.Millisecond
	cfg.Budget = 900 * time.Millisecond
	cfg.Jitter = func() time.Duration { return 600 * time.Millisecond }
	r, err := Run(t.Context(), cfg)
	require.NoError(t, err)
	require.Equal(t, codes.ModelProbeTimeout, r.Code)
	require.Equal(t, 1, r.Attempts, "attempt (0.4 s) + delay (0.6 s) would exceed the 0.9 s budget")
}

func TestSecondAttemptCappedByBudget(t *testing.T) {
	// A fake clock: the first attempt "took" 50 s of a 61 s budget, so the
	// retry after a 1.2 s delay is capped at the 9.8 s left, not 30 s.
	cfg, _ := fakeSetup(t, "http500", "hang")
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	cfg.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	cfg.AttemptCap = 0
	cfg.Budget = 0
	cfg.Jitter = func() time.Duration { return 1200 * time.Millisecond }
	var limits []time.Duration
	cfg.After = func(d time.Duration) <-chan time.Time {
		mu.Lock()
		now = now.Add(50*time.Second - 1200*time.Millisecond + d)
		mu.Unlock()
		ch := make(chan time.Time, 1)
		ch <- now
		return ch
	}
	hookAttemptLimit = func(d time.Duration) time.Duration {
		limits = append(limits, d)
		return 2 * time.Second // keep the real wait short
	}
	defer func() { hookAttemptLimit = nil }()
	r, err := Run(t.Context(), cfg)
	require.NoError(t, err)
	require.Equal(t, codes.ModelProbeTimeout, r.Code)
	require.Equal(t, []time.Duration{AttemptCap, Budget - 50*time.Second}, limits)
}

func TestDefaultJitterRange(t *testing.T) {
	var cfg Config
	cfg.defaults()
	seen := map[time.Duration]bool{}
	for range 2000 {
		d := cfg.Jitter()
		require.GreaterOrEqual(t, d, RetryDelayMin)
		require.LessOrEqual(t, d, RetryDelayMax)
		seen[d/(100*time.Millisecond)] = true
	}
	require.GreaterOrEqual(t, len(seen), 5, "spread over 1.0–1.5 s")
}

func TestSIGTERMDuringBackoffReturnsAtOnce(t *testing.T) {
	cfg, logs := fakeSetup(t, "http500", "success")
	inBackoff := make(chan time.Duration, 1)
	cfg.Jitter = nil // the default jitter: the delay must lie in 1–1.5 s
	cfg.After = func(d time.Duration) <-chan time.Time {
		inBackoff <- d
		return make(chan time.Time) // never fires: only cancellation can end the wait
	}
	ctx, cancel := context.WithCancel(t.Context())
	type res struct {
		r   Result
		err error
	}
	done := make(chan res, 1)
	go func() {
		r, err := Run(ctx, cfg)
		done <- res{r, err}
	}()
	d := <-inBackoff
	require.GreaterOrEqual(t, d, RetryDelayMin)
	require.LessOrEqual(t, d, RetryDelayMax)
	cancel()
	select {
	case got := <-done:
		require.ErrorIs(t, got.err, context.Canceled)
		require.Equal(t, 1, got.r.Attempts)
		require.Empty(t, got.r.Code, "no result is published after termination")
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancellation during the backoff")
	}
	require.Len(t, calls(t, cfg.CodexHome), 1, "no second attempt")
	require.Len(t, logs.Records(t), 1)
}

func TestSIGTERMDuringAttemptKillsAndReturns(t *testing.T) {
	cfg, _ := fakeSetup(t, "hang")
	cfg.AttemptCap = time.Hour
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, cfg)
		done <- err
	}()
	require.Eventually(t, func() bool { return len(calls(t, cfg.CodexHome)) == 1 }, 10*time.Second, 10*time.Millisecond)
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancellation during an attempt")
	}
	c := calls(t, cfg.CodexHome)[0]
	require.Error(t, syscall.Kill(c.Pid, 0), "the attempt's process was killed and reaped")
	requireGone(t, c.Child)
}

// requireGone waits for a killed grandchild to disappear (its new parent
// reaps the zombie asynchronously).
func requireGone(t *testing.T, pid int) {
	t.Helper()
	require.NotZero(t, pid)
	require.Eventually(t, func() bool { return syscall.Kill(pid, 0) != nil || zombie(pid) },
		5*time.Second, 10*time.Millisecond, "pid %d still running", pid)
}

func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] == "Z"
}

func TestUnavailable(t *testing.T) {
	for _, mut := range []func(*Config){
		func(c *Config) { c.Model = "anthropic/claude" },
		func(c *Config) { c.Model = "openai" },
		func(c *Config) { c.Model = "openai/" },
		func(c *Config) { c.Model = "xopenai/gpt" },
		func(c *Config) { c.Codex = "/nonexistent/codex" },
		func(c *Config) { c.CodexHome = "/nonexistent/home" },
		func(c *Config) {
			c.Provider = &Provider{Name: "Bad Name", BaseURL: "http://x/v1", RequiresOpenAIAuth: true}
		},
		func(c *Config) { c.Provider = &Provider{Name: "p", BaseURL: "ftp://x", RequiresOpenAIAuth: true} },
		func(c *Config) { c.Provider = &Provider{Name: "p", BaseURL: "http://x/v1\"", RequiresOpenAIAuth: true} },
		func(c *Config) { c.Provider = &Provider{Name: "p", BaseURL: "http://x/v1"} },
		func(c *Config) { c.Provider = &Provider{Name: "p", BaseURL: "http://x/v1", EnvKey: "K"} },
		func(c *Config) {
			c.Provider = &Provider{Name: "p", BaseURL: "http://x/v1", EnvKey: "bad-name"}
			c.EnvKeyValue = planted
		},
		func(c *Config) {
			c.Provider = &Provider{Name: "p", BaseURL: "http://x/v1\x01", RequiresOpenAIAuth: true}
		},
		func(c *Config) { c.WorkspaceID = "ws\"x" },
		func(c *Config) { c.OpenAIBaseURL = "http://127.0.0.1:1/v1" }, // with a custom provider
		func(c *Config) { c.Provider = nil; c.OpenAIBaseURL = "file:///etc" },
	} {
		cfg, logs := fakeSetup(t, "success")
		mut(&cfg)
		r, err := Run(t.Context(), cfg)
		require.NoError(t, err)
		require.Equal(t, codes.Unavailable, r.Code)
		require.Equal(t, 0, r.Attempts)
		require.Empty(t, calls(t, cfg.CodexHome))
		recs := logs.Records(t)
		require.Len(t, recs, 1)
		require.Equal(t, "UNAVAILABLE", recs[0]["code"])
		assertNoLeak(t, logs.String())
	}
}

func TestArgvAndEnvironment(t *testing.T) {
	t.Setenv("SSL_CERT_FILE", "/etc/ssl/custom.pem")
	t.Setenv("SSL_CERT_DIR", "")
	t.Setenv("OPENAI_API_KEY", planted)
	t.Setenv("HTTPS_PROXY", "http://proxy:3128")
	cfg, _ := fakeSetup(t, "success")
	cfg.Model = "codex/vendor/org/model"
	cfg.WorkspaceID = "ws-123"
	r, err := Run(t.Context(), cfg)
	require.NoError(t, err)
	require.Equal(t, codes.Ready, r.Code)
	c := calls(t, cfg.CodexHome)[0]

	env := slices.Clone(c.Env)
	slices.Sort(env)
	require.Equal(t, []string{"CODEX_HOME=" + cfg.CodexHome, "HOME=" + cfg.CodexHome, "PATH=" + os.Getenv("PATH"),
		"RUST_LOG=error", "SSL_CERT_FILE=/etc/ssl/custom.pem"}, env, "minimal environment; empty SSL_CERT_DIR dropped")

	a := c.Args
	require.NotContains(t, strings.Join(a, " "), planted)
	for _, f := range []string{"plugins", "apps", "remote_plugin", "unbounded_connection_retries", "shell_tool", "unified_exec"} {
		require.Contains(t, a, f)
		require.Equal(t, "--disable", a[slices.Index(a, f)-1])
	}
	exec := slices.Index(a, "exec")
	require.Positive(t, exec)
	require.Equal(t, []string{"-a", "never"}, a[exec-2:exec])
	require.Equal(t, []string{"--ephemeral", "--ignore-user-config", "--ignore-rules", "--skip-git-repo-check",
		"--json", "--sandbox", "read-only", "--cd"}, a[exec+1:exec+9])
	require.Equal(t, c.Cwd, a[exec+9], "--cd is the per-probe working directory")
	require.True(t, strings.HasPrefix(c.Cwd, cfg.TmpDir))
	require.NoDirExists(t, c.Cwd, "removed after the attempt")
	require.Equal(t, []string{"--model", "vendor/org/model", "--", Prompt}, a[exec+10:])
	for _, kv := range []string{"analytics.enabled=false", `web_search="disabled"`, "project_doc_max_bytes=0",
		"check_for_update_on_startup=false", "cli_auth_credentials_store=file", `forced_chatgpt_workspace_id="ws-123"`,
		`model_provider="oce"`,
		`model_providers.oce={name="oce",base_url="http://127.0.0.1:9/v1",wire_api="responses",requires_openai_auth=true,request_max_retries=0,stream_max_retries=0,supports_websockets=false}`} {
		i := slices.Index(a, kv)
		require.Positive(t, i, kv)
		require.Equal(t, "-c", a[i-1])
	}
}

func TestEnvKeyModeCarriesKeyOnlyInProbeEnv(t *testing.T) {
	cfg, logs := fakeSetup(t, "success")
	cfg.Provider = &Provider{Name: "oce", BaseURL: "http://127.0.0.1:9/v1", EnvKey: "OCE_PROBE_KEY"}
	cfg.EnvKeyValue = planted
	r, err := Run(t.Context(), cfg)
	require.NoError(t, err)
	require.Equal(t, codes.Ready, r.Code)
	c := calls(t, cfg.CodexHome)[0]
	require.Contains(t, c.Env, "OCE_PROBE_KEY="+planted, "env_key mode: by design the probe child holds the key")
	require.NotContains(t, strings.Join(c.Args, " "), planted)
	require.Contains(t, c.Args, `model_providers.oce={name="oce",base_url="http://127.0.0.1:9/v1",wire_api="responses",env_key="OCE_PROBE_KEY",request_max_retries=0,stream_max_retries=0,supports_websockets=false}`)
	assertNoLeak(t, logs.String())
}

func TestLoginWithAPIKeyFake(t *testing.T) {
	cfg, _ := fakeSetup(t)
	require.NoError(t, LoginWithAPIKey(t.Context(), cfg.Codex, cfg.CodexHome, []byte(planted+"\n")))
	b, err := os.ReadFile(filepath.Join(cfg.CodexHome, "fake-call-login.json"))
	require.NoError(t, err)
	require.NotContains(t, string(b), planted, "neither argv nor environment of the login child carries the key")
	st, err := os.Stat(filepath.Join(cfg.CodexHome, "auth.json"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	err = LoginWithAPIKey(t.Context(), cfg.Codex, cfg.CodexHome, []byte("  \n"))
	require.ErrorIs(t, err, ErrLogin)
	err = LoginWithAPIKey(t.Context(), cfg.Codex, "/nonexistent", []byte(planted))
	require.ErrorIs(t, err, ErrLogin)
	require.NotContains(t, err.Error(), planted)
}

func TestClassifyMessage(t *testing.T) {
	cases := []struct {
		msg   string
		auth  bool
		class codes.FailureClass
		retry bool
	}{
		{msg401, true, codes.ClassAuth, false},
		{msg403, true, codes.ClassAuth, false},
		{msg500, false, codes.ClassServer, true},
		{"unexpected status 503 Service Unavailable: overloaded", false, codes.ClassServer, true},
		{"exceeded retry limit, last status: 502 Bad Gateway", false, codes.ClassServer, false},
		{msgDrop, false, codes.ClassNetwork, true},
		{msgRefused, false, codes.ClassNetwork, true},
		{"Connection failed: error sending request: dns error: failed to lookup address", false, codes.ClassNetwork, true},
		{msgTLS, false, codes.ClassTLS, false},
		{msg429, false, codes.ClassRateLimit, false},
		{msgMissing, false, codes.ClassConfig, false},
		{"stream disconnected: invalid api key header", false, codes.ClassConfig, false},
		{"something odd", false, codes.ClassUnknown, false},
	}
	for _, c := range cases {
		got := classifyMessage(c.msg)
		require.Equal(t, messageClass{auth: c.auth, class: c.class, retry: c.retry}, got, c.msg)
	}
}

func FuzzClassify(f *testing.F) {
	f.Add([]byte(`{"type":"turn.started"}`+"\n"+`{"type":"item.completed","item":{"type":"agent_message","text":"READY"}}`+"\n"+`{"type":"turn.completed"}`), 0, "")
	f.Add([]byte(`{"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized"}}`), 1, "")
	f.Add([]byte(`{"type":"error","message":"Reconnecting... 1/5"}`), 0, "SIGKILL")
	f.Fuzz(func(t *testing.T, out []byte, code int, sig string) {
		evs := readEvents(bytes.NewReader(out))
		v := classify(evs, exit{code: code, signal: sig})
		require.True(t, codes.IsProbe(v.code))
		if v.code == codes.Ready {
			require.Nil(t, v.cause)
			require.Empty(t, v.class)
			require.False(t, v.retry)
			return
		}
		require.True(t, codes.IsFailureClass(v.class), v.class)
		if v.code == codes.ModelProbeFailed {
			require.NotNil(t, v.cause)
			require.True(t, codes.IsCauseKind(v.cause.Kind))
		}
		if v.code == codes.AuthenticationFailed {
			require.False(t, v.retry)
		}
	})
}
