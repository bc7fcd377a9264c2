package supervise_test

import (
	"context"
	"log/slog"
	"os"

	"oce.dev/oce/shared/supervise"
)

// A gatewayd-style main: supervise the OpenClaw gateway with its 330 s stop
// budget and exit with its status (143 after a SIGTERM stop, which
// tini -e 143 turns into 0). Credentials never reach the child's env.
func Example() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	s, err := supervise.New(supervise.Options{Log: log})
	if err != nil {
		os.Exit(1)
	}
	ctx := context.Background()
	p, err := s.Start(ctx, supervise.Spec{
		Name:       "openclaw-gateway",
		Path:       "/opt/node/bin/node",
		Args:       []string{"/opt/openclaw/openclaw.mjs", "gateway", "run"},
		Env:        supervise.Env(os.Environ(), "OPENAI_API_KEY", "CODEX_*"),
		Stdout:     os.Stdout,
		Stderr:     os.Stderr,
		StopBudget: supervise.GatewayStopBudget,
	})
	if err != nil {
		// A startup failure is held: stay alive and unready until stopped.
		_ = s.Hold(ctx)
		os.Exit(0)
	}
	st, _ := p.Wait(ctx)
	os.Exit(st.ShellCode())
}
