package codexprobe

// Integration tests: the real Codex 0.169.0 (runtimes.Ensure) against the
// fake provider, inside the loopback-only namespace TestMain set up.

import (
	"bytes"
	"context"
	"oce.dev/oce/shared/logtest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/probe/fakeprovider"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/netns"
	"oce.dev/oce/shared/runtimes"
)

const goodKey = "sk-good-fake-provider-key-0001"

type realRig struct {
	cfg  Config
	fake *fakeprovider.Server
	logs *logtest.Buffer
}

// realSetup starts the fake provider (accepting only goodKey unless fo
// names the valid keys), logs key in
// through stdin into a private CODEX_HOME and returns a probe config that
// uses it via requires_openai_auth.
func realSetup(t testing.TB, key string, fo fakeprovider.Options) realRig {
	t.Helper()
	require.NoError(t, netns.Isolated(), "real Codex runs only in the loopback-only namespace")
	paths, err := runtimes.Ensure(t.Context())
	require.NoError(t, err)
	if fo.ValidKeys == nil {
		fo.ValidKeys = []string{goodKey}
	}
	fake, err := fakeprovider.Start(t.Context(), fo)
	require.NoError(t, err)
	t.Cleanup(func() { _ = fake.Close() })
	home := filepath.Join(t.TempDir(), "codex-home")
	require.NoError(t, os.Mkdir(home, 0o700))
	require.NoError(t, LoginWithAPIKey(t.Context(), paths.Codex, home, []byte(key)))
	logs := &logtest.Buffer{}
	return realRig{
		cfg: Config{
			Codex:     paths.Codex,
			CodexHome: home,
			Home:      t.TempDir(),
			TmpDir:    t.TempDir(),
			Model:     "openai/gpt-6-sol",
			Provider:  &Provider{Name: "oce", BaseURL: fake.URL() + "/v1", RequiresOpenAIAuth: true},
			Log:       newJSONLogger(logs),
		},
		fake: fake,
		logs: logs,
	}
}

func TestRealLoginWritesPrivateAuthFile(t *testing.T) {
	rig := realSetup(t, planted, fakeprovider.Options{})
	b, err := os.ReadFile(filepath.Join(rig.cfg.CodexHome, "auth.json"))
	require.NoError(t, err)
	require.Contains(t, string(b), planted, "the key went through stdin into auth.json")
	st, err := os.Stat(filepath.Join(rig.cfg.CodexHome, "auth.json"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
}

func TestRealCodexReady(t *testing.T) {
	rig := realSetup(t, goodKey, fakeprovider.Options{})
	r, err := Run(t.Context(), rig.cfg)
	require.NoError(t, err)
	require.Equal(t, codes.Ready, r.Code, "logs: %s", rig.logs.String())
	require.Equal(t, 1, r.Attempts)
	require.Nil(t, r.Cause)
	require.EqualValues(t, 1, rig.fake.Requests())
	lr := rig.fake.LastRequest()
	require.Equal(t, "/v1/responses", lr.Path)
	require.Equal(t, Prompt, lr.Prompt)
	require.Equal(t, "gpt-6-sol", lr.Model)
	require.True(t, lr.Stream)
	require.Contains(t, lr.HeaderNames, "Authorization")
	for _, tool := range []string{"exec_command", "shell", "write_stdin", "view_image", "web_search", "image_generation"} {
		require.NotContains(t, lr.Tools, tool, "hardened probe declares no execution or external tool")
	}
	recs := rig.logs.Records(t)
	require.Len(t, recs, 1)
	require.Equal(t, "READY", recs[0]["code"])
	require.EqualValues(t, 0, recs[0]["exitCode"])
	assertNoLeak(t, rig.logs.String())
}

// TestRealCodexOverWebSocket: with supports_websockets the real Codex
// speaks Responses over WebSocket to the fake (warm-up frame, then the turn).
func TestRealCodexOverWebSocket(t *testing.T) {
	rig := realSetup(t, goodKey, fakeprovider.Options{})
	rig.cfg.Provider.SupportsWebsockets = true
	r, err := Run(t.Context(), rig.cfg)
	require.NoError(t, err)
	require.Equal(t, codes.Ready, r.Code, "logs: %s", rig.logs.String())
	require.EqualValues(t, 1, rig.fake.Requests())
	lr := rig.fake.LastRequest()
	require.True(t, lr.WebSocket)
	require.Equal(t, Prompt, lr.Prompt)
}

// TestRealCodexBuiltinProvider: Codex's built-in openai provider (auth.json
// from the stdin login) pointed at the fake with -c openai_base_url. It
// speaks Responses over WebSocket first.
func TestRealCodexBuiltinProvider(t *testing.T) {
	rig := realSetup(t, goodKey, fakeprovider.Options{})
	rig.cfg.Provider = nil
	rig.cfg.OpenAIBaseURL = rig.fake.URL() + "/v1"
	r, err := Run(t.Context(), rig.cfg)
	require.NoError(t, err)
	require.Equal(t, codes.Ready, r.Code, "logs: %s", rig.logs.String())
	require.EqualValues(t, 1, rig.fake.Requests())
	require.True(t, rig.fake.LastRequest().WebSocket)

	// A bad key: the built-in provider reconnects and retries internally
	// (measured: 7 WebSocket handshakes and 6 POSTs, about 13 s) and still
	// ends in a turn.failed naming 401.
	bad := realSetup(t, planted, fakeprovider.Options{})
	bad.cfg.Provider = nil
	bad.cfg.OpenAIBaseURL = bad.fake.URL() + "/v1"
	r, err = Run(t.Context(), bad.cfg)
	require.NoError(t, err)
	require.Equal(t, codes.AuthenticationFailed, r.Code, "logs: %s", bad.logs.String())
	require.Equal(t, 1, r.Attempts)
	assertNoLeak(t, bad.logs.String())
}

func TestRealCodexEnvKeyReady(t *testing.T) {
	rig := realSetup(t, "unused", fakeprovider.Options{})
	rig.cfg.Provider = &Provider{Name: "oce", BaseURL: rig.fake.URL() + "/v1", EnvKey: "OCE_PROBE_KEY"}
	rig.cfg.EnvKeyValue = goodKey
	r, err := Run(t.Context(), rig.cfg)
	require.NoError(t, err)
	require.Equal(t, codes.Ready, r.Code, "logs: %s", rig.logs.String())
	require.EqualValues(t, 1, rig.fake.Requests())
}

func TestRealCodexBadKey(t *testing.T) {
	rig := realSetup(t, planted, fakeprovider.Options{})
	r, err := Run(t.Context(), rig.cfg)
	require.NoError(t, err)
	require.Equal(t, codes.AuthenticationFailed, r.Code)
	require.Equal(t, codes.ClassAuth, r.FailureClass)
	require.Equal(t, 1, r.Attempts, "401 never retries")
	require.EqualValues(t, 1, rig.fake.Requests())
	recs := rig.logs.Records(t)
	require.Len(t, recs, 1)
	require.EqualValues(t, 1, recs[0]["exitCode"])
	assertNoLeak(t, rig.logs.String())
}

func TestRealCodexFaults(t *testing.T) {
	cases := []struct {
		fault    fakeprovider.Fault
		once     int // >0: fault for that many requests, then success
		code     codes.Code
		class    codes.FailureClass
		attempts int
	}{
		{fakeprovider.Fault500, 0, codes.ModelProbeFailed, codes.ClassServer, 2},
		{fakeprovider.Fault500, 1, codes.Ready, "", 2},
		{fakeprovider.Fault403, 0, codes.AuthenticationFailed, codes.ClassAuth, 1},
		{fakeprovider.Fault401NonJSON, 0, codes.AuthenticationFailed, codes.ClassAuth, 1},
		{fakeprovider.Fault429, 0, codes.ModelProbeFailed, codes.ClassRateLimit, 1},
		{fakeprovider.FaultDrop, 0, codes.ModelProbeFailed, codes.ClassNetwork, 2},
		{fakeprovider.FaultResponseFailed, 0, codes.ModelProbeFailed, codes.ClassNetwork, 2},
	}
	for _, c := range cases {
		t.Run(string(c.fault)+"x"+strconv.Itoa(c.once), func(t *testing.T) {
			rig := realSetup(t, goodKey, fakeprovider.Options{})
			if c.once > 0 {
				rig.fake.SetFaultOnce(c.fault, c.once)
			} else {
				rig.fake.SetFault(c.fault)
			}
			r, err := Run(t.Context(), rig.cfg)
			require.NoError(t, err)
			require.Equal(t, c.code, r.Code, "logs: %s", rig.logs.String())
			require.Equal(t, c.class, r.FailureClass)
			require.Equal(t, c.attempts, r.Attempts)
			require.EqualValues(t, c.attempts, rig.fake.Requests(), "model requests the provider saw")
			if c.code == codes.ModelProbeFailed {
				require.Equal(t, &codes.Cause{Kind: codes.CauseCodexOutcome, Detail: DetailTurnFailed}, r.Cause)
			}
			require.Len(t, rig.logs.Records(t), c.attempts)
			assertNoLeak(t, rig.logs.String())
		})
	}
}

func TestRealCodexConnectionRefusedRetriesOnce(t *testing.T) {
	rig := realSetup(t, goodKey, fakeprovider.Options{})
	require.NoError(t, rig.fake.Close())
	r, err := Run(t.Context(), rig.cfg)
	require.NoError(t, err)
	require.Equal(t, codes.ModelProbeFailed, r.Code)
	require.Equal(t, codes.ClassNetwork, r.FailureClass)
	require.Equal(t, 2, r.Attempts)
}

// TestRealCodexSlowProviderTimesOut uses a shortened cap and budget (4 s /
// 12 s) so the suite stays quick; TestRealCodexSlowProviderRealBudget runs
// the seed's 30 s / 61 s.
func TestRealCodexSlowProviderTimesOut(t *testing.T) {
	rig := realSetup(t, goodKey, fakeprovider.Options{Fault: fakeprovider.FaultSlow})
	rig.cfg.AttemptCap = 4 * time.Second
	rig.cfg.Budget = 12 * time.Second
	r, err := Run(t.Context(), rig.cfg)
	require.NoError(t, err)
	require.Equal(t, codes.ModelProbeTimeout, r.Code)
	require.Equal(t, 2, r.Attempts)
	require.EqualValues(t, 2, rig.fake.Requests())
	for _, rec := range rig.logs.Records(t) {
		require.Equal(t, "MODEL_PROBE_TIMEOUT", rec["code"])
		require.Equal(t, "SIGKILL", rec["signal"])
	}
	requireNoCodexLeft(t, rig.cfg)
}

func TestRealCodexSlowProviderRealBudget(t *testing.T) {
	rig := realSetup(t, goodKey, fakeprovider.Options{Fault: fakeprovider.FaultSlow})
	r, err := Run(t.Context(), rig.cfg)
	require.NoError(t, err)
	require.Equal(t, codes.ModelProbeTimeout, r.Code)
	require.Equal(t, 2, r.Attempts)
	require.EqualValues(t, 2, rig.fake.Requests())
	// The budget is a contract, not a performance target: attempts and the
	// delay fit in 61 s, plus the moment it takes to reap a killed group.
	require.Less(t, r.Elapsed, Budget+2*time.Second)
	require.Greater(t, r.Elapsed, AttemptCap+RetryDelayMin, "the second attempt ran into the remaining budget")
	recs := rig.logs.Records(t)
	require.Len(t, recs, 2)
	require.InDelta(t, float64(AttemptCap.Milliseconds()), recs[0]["elapsedMs"], 2000)
	requireNoCodexLeft(t, rig.cfg)
}

// findCodex returns the pid of the running probe child: a child of this
// process whose argv names the per-probe working directory under cfg.TmpDir.
func findCodex(cfg Config) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		argv := strings.Split(string(b), "\x00")
		if len(argv) > 0 && argv[0] == cfg.Codex && bytes.Contains(b, []byte(cfg.TmpDir)) && ppid(pid) == os.Getpid() {
			return pid
		}
	}
	return 0
}

func requireNoCodexLeft(t *testing.T, cfg Config) {
	t.Helper()
	require.Eventually(t, func() bool { p := findCodex(cfg); return p == 0 || zombie(p) }, 5*time.Second, 20*time.Millisecond)
}

// TestRealCodexSecretNotInChild checks the running probe child's argv and
// environment (/proc/PID/cmdline, environ) and the logs for a planted key.
func TestRealCodexSecretNotInChild(t *testing.T) {
	for _, mode := range []string{"login", "env_key"} {
		t.Run(mode, func(t *testing.T) {
			t.Setenv("OPENAI_API_KEY", planted) // the supervisor's own env must not leak either
			t.Setenv("SSL_CERT_FILE", "")       // unset-equivalent: dropped
			t.Setenv("SSL_CERT_DIR", "/etc/ssl/certs")
			rig := realSetup(t, planted, fakeprovider.Options{Fault: fakeprovider.FaultSlow,
				SlowInterval: 200 * time.Millisecond, ValidKeys: []string{planted}})
			if mode == "env_key" {
				rig.cfg.Provider = &Provider{Name: "oce", BaseURL: rig.fake.URL() + "/v1", EnvKey: "OCE_PROBE_KEY"}
				rig.cfg.EnvKeyValue = planted
			}
			rig.cfg.AttemptCap = time.Minute
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() {
				_, err := Run(ctx, rig.cfg)
				done <- err
			}()
			var pid int
			require.Eventually(t, func() bool { pid = findCodex(rig.cfg); return pid != 0 }, 20*time.Second, 20*time.Millisecond)
			// Wait until the child talks to the provider, so it is fully set up.
			require.Eventually(t, func() bool { return rig.fake.Requests() > 0 }, 20*time.Second, 20*time.Millisecond)
			cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			require.NoError(t, err)
			environ, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
			require.NoError(t, err)
			cancel()
			require.ErrorIs(t, <-done, context.Canceled)
			requireNoCodexLeft(t, rig.cfg)

			require.NotContains(t, string(cmdline), planted)
			vars := strings.Split(strings.TrimRight(string(environ), "\x00"), "\x00")
			var names []string
			for _, v := range vars {
				names = append(names, v[:strings.IndexByte(v, '=')])
			}
			slices.Sort(names)
			if mode == "login" {
				require.NotContains(t, string(environ), planted)
				require.Equal(t, []string{"CODEX_HOME", "HOME", "PATH", "RUST_LOG", "SSL_CERT_DIR"}, names)
			} else {
				// env_key mode: by design the key is in this one child's environment.
				require.Contains(t, vars, "OCE_PROBE_KEY="+planted)
				require.Equal(t, []string{"CODEX_HOME", "HOME", "OCE_PROBE_KEY", "PATH", "RUST_LOG", "SSL_CERT_DIR"}, names)
			}
			assertNoLeak(t, rig.logs.String())
		})
	}
}

func ppid(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 2 {
		return 0
	}
	p, _ := strconv.Atoi(f[1])
	return p
}
