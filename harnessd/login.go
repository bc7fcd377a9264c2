package harnessd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/logging"
	"oce.dev/oce/shared/phase"
	"oce.dev/oce/shared/supervise"
)

// Login budgets (docs/design/reference.md#s3).
const (
	// LoginAttemptTimeout bounds one `codex login` process.
	LoginAttemptTimeout = 30 * time.Second
	// TokenLoginAttempts is how often an access-token login runs; only a
	// timed-out attempt is retried.
	TokenLoginAttempts = 3
	// LoginOutputLimit caps what a login may print (it prints one line).
	LoginOutputLimit = 64 << 10
)

// ErrLogin reports a failed `codex login`; its text never carries the
// credential or Codex's output.
var ErrLogin = errors.New("harnessd: codex login failed")

// runFunc runs a one-shot child (Supervisor.Run).
type runFunc func(ctx context.Context, rs supervise.RunSpec) (supervise.RunResult, error)

// authRejected matches login output reporting that the provider refused the
// credential (401/403).
var authRejected = regexp.MustCompile(`(?i)\b(401|403)\b|unauthori[sz]ed|forbidden`)

// ClassifyLogin maps a failed login's output to its held code and failure
// class: AUTHENTICATION_FAILED when it reports 401/403, else LOGIN_FAILED.
func ClassifyLogin(output []byte, timedOut bool) (codes.Code, codes.FailureClass) {
	switch {
	case authRejected.Match(output):
		return codes.AuthenticationFailed, codes.ClassAuth
	case timedOut:
		return codes.LoginFailed, codes.ClassTimeout
	}
	return codes.LoginFailed, codes.ClassUnknown
}

// loginSpec is the `codex login` command of a mode; the credential goes on
// stdin only.
func loginSpec(cfg *Config, env []string) supervise.RunSpec {
	rs := supervise.RunSpec{
		Name: "codex-login", Path: cfg.Codex, Env: env, Dir: cfg.CodexHome,
		Timeout: LoginAttemptTimeout, OutputLimit: LoginOutputLimit,
	}
	rs.Args = []string{"-c", "cli_auth_credentials_store=file"}
	if cfg.LoginMode == LoginServiceAccount {
		rs.Args = append(rs.Args, "-c", "forced_chatgpt_workspace_id="+tomlString(cfg.WorkspaceID))
	}
	switch cfg.LoginMode {
	case LoginAPIKey:
		rs.Args = append(rs.Args, "login", "--with-api-key")
		rs.Stdin = []byte(cfg.APIKey + "\n")
	default:
		rs.Args = append(rs.Args, "login", "--with-access-token")
		rs.Stdin = []byte(cfg.AccessToken + "\n")
	}
	return rs
}

// login runs the codex-login step: one attempt for an API key (it only
// writes auth.json), up to TokenLoginAttempts for an access token, retried
// only when an attempt timed out. Each attempt logs a codex.login record
// with its closed outcome.
func login(ctx context.Context, run runFunc, cfg *Config, env []string, log *slog.Logger) error {
	attempts := 1
	if cfg.LoginMode != LoginAPIKey {
		attempts = TokenLoginAttempts
	}
	var code codes.Code
	var class codes.FailureClass
	for i := 1; i <= attempts; i++ {
		start := time.Now()
		res, err := run(ctx, loginSpec(cfg, env))
		ms := time.Since(start).Milliseconds()
		if err == nil && res.Status.Success() {
			logging.Event(ctx, log, map[string]any{"event": logging.EventCodexLogin, "outcome": logging.OutcomeOK, "elapsedMs": ms})
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		timedOut := res.TimedOut || errors.Is(err, supervise.ErrTimeout)
		out := append(append([]byte{}, res.Stdout...), res.Stderr...)
		code, class = ClassifyLogin(out, timedOut)
		if err != nil && !timedOut && !errors.Is(err, supervise.ErrOutputLimit) {
			class = codes.ClassConfig // the binary could not run
		}
		logging.Event(ctx, log, map[string]any{"event": logging.EventCodexLogin, "outcome": logging.OutcomeFailed,
			"code": string(code), "failureClass": string(class), "elapsedMs": ms})
		if !timedOut {
			break
		}
	}
	return phase.FailCheck(PhaseCodexLogin, code, fmt.Errorf("%w: %s", ErrLogin, class))
}
