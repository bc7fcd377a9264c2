// Package codexprobe is the dedicated Codex Harness's startup model probe
// (docs/design/seed-001.md; docs/design/reference.md#s2-2; docs/design/codex.md#s5): one hardened `codex exec --json`
// turn against the configured primary model, retried once after a jittered
// 1–1.5 s for a timeout or a transient failure, within a 61 s budget.
// Only closed-set codes, classes and causes are logged, never provider text.
package codexprobe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"regexp"
	"time"

	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/modelref"
)

// Budgets (docs/design/seed-001.md).
const (
	// AttemptCap bounds one attempt.
	AttemptCap = 30 * time.Second
	// Budget bounds the whole probe, retry delay included.
	Budget = 61 * time.Second
	// RetryDelayMin and RetryDelayMax bound the jittered delay before the one retry.
	RetryDelayMin = 1000 * time.Millisecond
	RetryDelayMax = 1500 * time.Millisecond
	// MaxAttempts is one attempt plus one retry.
	MaxAttempts = 2
)

// hookAttemptLimit lets tests observe (and shorten) each attempt's limit.
var hookAttemptLimit func(time.Duration) time.Duration

// LogEvent is the message of the per-attempt record.
const LogEvent = "codex.model_probe"

// ErrConfig reports a probe configuration that cannot run (UNAVAILABLE).
var ErrConfig = errors.New("codexprobe: bad configuration")

// modelPattern is the model ref precondition (docs/design/reference.md#s2-2).
var modelPattern = regexp.MustCompile(`^(openai|codex)/.+`)

// Config is one probe's input.
type Config struct {
	// Codex is the codex binary.
	Codex string
	// CodexHome is the private, existing CODEX_HOME (holds auth.json in
	// RequiresOpenAIAuth mode).
	CodexHome string
	// Home is the child's HOME; default CodexHome.
	Home string
	// TmpDir is where the per-probe working directory is created; default os.TempDir().
	TmpDir string
	// Model is the model ref, e.g. openai/gpt-6-sol; Codex gets the part after the first slash.
	Model string
	// Provider selects a custom model provider; nil uses Codex's built-in
	// one (which always uses auth.json from LoginWithAPIKey, tries Responses
	// over WebSocket first and retries internally: 0.169.0 refuses retry
	// overrides for built-in providers).
	Provider *Provider
	// OpenAIBaseURL points the built-in provider elsewhere (-c openai_base_url);
	// only with a nil Provider.
	OpenAIBaseURL string
	// EnvKeyValue is the key placed in Provider.EnvKey (env_key mode only).
	EnvKeyValue string
	// WorkspaceID pins forced_chatgpt_workspace_id when set.
	WorkspaceID string
	// Log receives the codex.model_probe records; default discards.
	Log *slog.Logger

	// AttemptCap and Budget override the seed's 30 s / 61 s (tests only).
	AttemptCap, Budget time.Duration
	// Jitter returns the retry delay; default uniform in [1 s, 1.5 s].
	Jitter func() time.Duration
	// Now and After are the clock; default time.Now and time.After.
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
}

// Result is a finished probe's outcome.
type Result struct {
	// Code is READY, MODEL_PROBE_TIMEOUT, MODEL_PROBE_FAILED,
	// AUTHENTICATION_FAILED or UNAVAILABLE.
	Code codes.Code `json:"code"`
	// Cause qualifies MODEL_PROBE_FAILED (CODEX_OUTCOME or PROCESS_EXIT).
	Cause *codes.Cause `json:"cause,omitempty"`
	// FailureClass is the closed class of a failure ("" on READY).
	FailureClass codes.FailureClass `json:"failureClass,omitempty"`
	// Attempts is how many codex processes ran (0, 1 or 2).
	Attempts int `json:"attempts"`
	// Elapsed is the probe's wall time, retry delay included.
	Elapsed time.Duration `json:"-"`
}

// Ready reports whether the probe succeeded.
func (r Result) Ready() bool { return r.Code == codes.Ready }

func (cfg *Config) defaults() {
	if cfg.Home == "" {
		cfg.Home = cfg.CodexHome
	}
	if cfg.TmpDir == "" {
		cfg.TmpDir = os.TempDir()
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.AttemptCap <= 0 {
		cfg.AttemptCap = AttemptCap
	}
	if cfg.Budget <= 0 {
		cfg.Budget = Budget
	}
	if cfg.Jitter == nil {
		cfg.Jitter = func() time.Duration {
			return RetryDelayMin + rand.N(RetryDelayMax-RetryDelayMin+1)
		}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.After == nil {
		cfg.After = time.After
	}
}

// check validates what must hold before any process starts.
func (cfg *Config) check() (model string, err error) {
	if !modelPattern.MatchString(cfg.Model) {
		return "", fmt.Errorf("%w: model ref must be openai/… or codex/…", ErrConfig)
	}
	ref, err := modelref.Parse(cfg.Model)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if err := cfg.Provider.validate(); err != nil {
		return "", err
	}
	if cfg.WorkspaceID != "" && !tomlSafe(cfg.WorkspaceID) {
		return "", fmt.Errorf("%w: workspace id", ErrConfig)
	}
	if cfg.OpenAIBaseURL != "" && (cfg.Provider != nil || !validURL(cfg.OpenAIBaseURL)) {
		return "", fmt.Errorf("%w: openai base URL", ErrConfig)
	}
	if cfg.Provider != nil && cfg.Provider.EnvKey != "" && cfg.EnvKeyValue == "" {
		return "", fmt.Errorf("%w: env_key mode without a key", ErrConfig)
	}
	if st, err := os.Stat(cfg.Codex); err != nil || st.IsDir() {
		return "", fmt.Errorf("%w: codex binary", ErrConfig)
	}
	if st, err := os.Stat(cfg.CodexHome); err != nil || !st.IsDir() {
		return "", fmt.Errorf("%w: CODEX_HOME must be an existing directory", ErrConfig)
	}
	return ref.Model, nil
}

// Run probes the model. It returns after retries end with the final result;
// its error is non-nil only when ctx ends (termination), which it honours at
// once, also during the retry delay.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg.defaults()
	start := cfg.Now()
	model, err := cfg.check()
	if err != nil {
		r := Result{Code: codes.Unavailable, FailureClass: codes.ClassConfig}
		logAttempt(ctx, cfg.Log, 0, 0, exit{code: -1}, verdict{code: r.Code, class: r.FailureClass})
		return r, nil
	}
	var v verdict
	attempt := 0
	for attempt < MaxAttempts {
		remaining := cfg.Budget - cfg.Now().Sub(start)
		if remaining <= 0 {
			break
		}
		attempt++
		limit := min(cfg.AttemptCap, remaining)
		if hookAttemptLimit != nil {
			limit = hookAttemptLimit(limit)
		}
		x, evs, err := runAttempt(ctx, &cfg, model, limit)
		if err != nil {
			return Result{Attempts: attempt, Elapsed: cfg.Now().Sub(start)}, fmt.Errorf("codexprobe: %w", err)
		}
		if x.startErr {
			v = verdict{code: codes.Unavailable, class: codes.ClassConfig}
		} else {
			v = classify(evs, x.exit)
		}
		logAttempt(ctx, cfg.Log, attempt, cfg.Now().Sub(start), x.exit, v)
		if !v.retry || attempt == MaxAttempts {
			break
		}
		delay := cfg.Jitter()
		if cfg.Budget-cfg.Now().Sub(start)-delay <= 0 {
			break
		}
		select {
		case <-ctx.Done():
			return Result{Attempts: attempt, Elapsed: cfg.Now().Sub(start)}, fmt.Errorf("codexprobe: %w", ctx.Err())
		case <-cfg.After(delay):
		}
	}
	return Result{Code: v.code, Cause: v.cause, FailureClass: v.class, Attempts: attempt,
		Elapsed: cfg.Now().Sub(start)}, nil
}

// logAttempt writes one codex.model_probe record: attempt, elapsedMs (since
// the probe started), exitCode (null when signalled), signal (null when it
// exited), code, and for failures the closed failureClass and cause.
func logAttempt(ctx context.Context, l *slog.Logger, attempt int, elapsed time.Duration, x exit, v verdict) {
	a := []slog.Attr{slog.Int("attempt", attempt), slog.Int64("elapsedMs", elapsed.Milliseconds())}
	if x.signal == "" && x.code >= 0 {
		a = append(a, slog.Int("exitCode", x.code), slog.Any("signal", nil))
	} else if x.signal != "" {
		a = append(a, slog.Any("exitCode", nil), slog.String("signal", x.signal))
	} else {
		a = append(a, slog.Any("exitCode", nil), slog.Any("signal", nil))
	}
	a = append(a, slog.String("code", string(v.code)))
	lvl := slog.LevelInfo
	if v.code != codes.Ready {
		lvl = slog.LevelWarn
		a = append(a, slog.String("failureClass", string(v.class)), slog.Bool("retry", v.retry))
		if v.cause != nil {
			a = append(a, slog.String("causeKind", string(v.cause.Kind)), slog.String("causeDetail", v.cause.Detail))
		}
	}
	l.LogAttrs(ctx, lvl, LogEvent, a...)
}
