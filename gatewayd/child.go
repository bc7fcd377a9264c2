package gatewayd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"time"

	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/logging"
	"oce.dev/oce/shared/phase"
	"oce.dev/oce/shared/supervise"
)

// Phase names recorded after startup (docs/design/reference.md#s1-2).
const (
	PhaseGatewayRespawn      = "gateway-respawn"
	PhasePeerStatusChanged   = "peer-status-changed"
	PhasePeerStatusRestored  = "peer-status-restored"
	gatewayChildName         = "openclaw-gateway"
	doctorChildName          = "openclaw-doctor"
	readyProbeRequestTimeout = 2 * time.Second
)

// Errors of the respawn policy.
var (
	// ErrRespawnExhausted: the respawn budget (per window or per respawn) is spent.
	ErrRespawnExhausted = errors.New("gatewayd: gateway respawn budget exhausted")
	// ErrChildExited: the gateway exited before it became ready.
	ErrChildExited = errors.New("gatewayd: gateway exited before ready")
	// ErrNotReady: the gateway did not reach /readyz 200 in time.
	ErrNotReady = errors.New("gatewayd: gateway not ready in time")
)

// child is one running gateway process with its output adapters.
type child struct {
	p       *supervise.Process
	outputs []io.Closer
}

// spawn starts one `openclaw gateway run` in its own process group; its
// output becomes JSON records.
func (g *Gatewayd) spawn(ctx context.Context) (*child, error) {
	cmd := g.cfg.OpenClawCommand
	args := append(append([]string{}, cmd[1:]...), "gateway", "run", "--port", strconv.Itoa(g.cfg.Port),
		"--bind", g.cfg.Bind, "--auth", g.authMode)
	out := logging.LineWriter(g.log, "stdout", nil)
	errw := logging.LineWriter(g.log, "stderr", nil)
	p, err := g.sup.Start(ctx, supervise.Spec{Name: gatewayChildName, Path: cmd[0], Args: args, Env: g.gatewayEnv(true),
		Dir: g.cfg.StateDir, Stdout: out, Stderr: errw, StopBudget: g.cfg.Policy.StopBudget})
	if err != nil {
		out.Close()
		errw.Close()
		return nil, err
	}
	c := &child{p: p, outputs: []io.Closer{out, errw}}
	go func() {
		<-p.Done()
		for _, o := range c.outputs {
			o.Close()
		}
	}()
	return c, nil
}

// gatewayEnv is the environment of the gateway (secrets included when
// withSecrets) and of doctor (without).
func (g *Gatewayd) gatewayEnv(withSecrets bool) []string {
	base := g.cfg.ChildEnv
	if base == nil {
		base = os.Environ()
	}
	drop := append(append([]string{}, secretEnv...), "OCE_*", contract.EnvAdmittedConfig, contract.EnvOpenClawStateDir,
		"OPENCLAW_CONFIG_READONLY", "OPENCLAW_DISABLE_BONJOUR", "OPENCLAW_NO_AUTO_UPDATE", "NODE_COMPILE_CACHE")
	env := supervise.Env(base, drop...)
	env = append(env,
		contract.EnvAdmittedConfig+"="+g.renderedPath,
		contract.EnvOpenClawStateDir+"="+g.cfg.StateDir,
		"OPENCLAW_DISABLE_BONJOUR=1",
		"OPENCLAW_NO_AUTO_UPDATE=1",
	)
	if g.configReadonly {
		env = append(env, "OPENCLAW_CONFIG_READONLY=1")
	}
	if g.cfg.Topology == contract.DedicatedCodex {
		// the gateway tries to update the codex plugin at every start; offline
		// that fails at once instead of retrying DNS for a minute
		env = append(supervise.Env(env, "npm_config_offline", "npm_config_cache"), "npm_config_offline=true")
		if c := g.npmCache(); c != "" {
			env = append(env, "npm_config_cache="+c)
		}
	}
	if !withSecrets {
		return env
	}
	if g.managedPassword {
		env = append(env, ManagedPasswordEnv+"="+g.cfg.Password)
	}
	if g.cfg.Topology == contract.Embedded && g.keyEnv != "" && g.cfg.ModelKey != "" {
		// the combined gateway/Harness calls the model (docs/design/seed-001.md)
		env = append(env, g.keyEnv+"="+g.cfg.ModelKey)
	}
	return env
}

// childReady asks the gateway's own /readyz.
func (g *Gatewayd) childReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyProbeRequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.cfg.localHTTP()+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := g.httpc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("gateway readyz %d", resp.StatusCode)
	}
	return nil
}

// waitReady polls /readyz until 200, the child exits, or within passes.
func (g *Gatewayd) waitReady(ctx context.Context, c *child, within time.Duration) error {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(g.cfg.Policy.ReadyPoll)
	defer tick.Stop()
	for {
		if g.childReady(ctx) == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.p.Exited():
			return ErrChildExited
		case <-deadline.C:
			return ErrNotReady
		case <-tick.C:
		}
	}
}

// retire ends an old gateway: SIGTERM to its group, OldProcessGrace, then
// SIGKILL; it returns once the process is gone.
func (g *Gatewayd) retire(c *child) {
	if c == nil {
		return
	}
	select {
	case <-c.p.Exited():
	default:
		_ = c.p.Signal(syscall.SIGTERM)
		t := time.NewTimer(g.cfg.Policy.OldProcessGrace)
		select {
		case <-c.p.Exited():
		case <-t.C:
			_ = c.p.Kill()
		}
		t.Stop()
	}
	<-c.p.Done()
}

// respawn replaces the gateway under the policy: at most MaxRespawns per
// RespawnWindow, AttemptsPerRespawn attempts each reaching /readyz 200
// within ReadyWithin, backoff BackoffBase·2^(n−1) before attempt n.
func (g *Gatewayd) respawn(ctx context.Context, old *child) (*child, error) {
	start := time.Now()
	pol := g.cfg.Policy
	kept := g.respawns[:0]
	for _, t := range g.respawns {
		if start.Sub(t) < pol.RespawnWindow {
			kept = append(kept, t)
		}
	}
	g.respawns = kept
	if len(g.respawns) >= pol.MaxRespawns {
		g.retire(old)
		return nil, fmt.Errorf("%w: %d respawns within %s", ErrRespawnExhausted, len(g.respawns), pol.RespawnWindow)
	}
	g.respawns = append(g.respawns, start)
	prev := old
	for n := 1; n <= pol.AttemptsPerRespawn; n++ {
		g.retire(prev)
		if err := sleepCtx(ctx, pol.BackoffBase<<(n-1)); err != nil {
			return nil, err
		}
		c, err := g.spawn(ctx)
		if err == nil {
			if err = g.waitReady(ctx, c, pol.ReadyWithin); err == nil {
				g.phases.Record(PhaseGatewayRespawn, phase.OK, time.Since(start), "")
				return c, nil
			}
		}
		if ctx.Err() != nil {
			g.retire(c)
			return nil, ctx.Err()
		}
		if configInvalid(c) {
			return nil, errConfigInvalid // no respawn can fix the configuration
		}
		logging.Event(ctx, g.log, map[string]any{"event": logging.EventGatewayRespawn, "container": "gateway",
			"outcome": logging.OutcomeFailed, "attempt": n, "ms": time.Since(start).Milliseconds()})
		g.log.Warn("gateway respawn attempt failed", "attempt", n, "reason", attemptReason(err))
		prev = c
	}
	g.retire(prev)
	return nil, fmt.Errorf("%w: %d attempts", ErrRespawnExhausted, pol.AttemptsPerRespawn)
}

// attemptReason is a closed, log-safe reason for a failed attempt.
func attemptReason(err error) string {
	switch {
	case errors.Is(err, ErrChildExited):
		return "exited"
	case errors.Is(err, ErrNotReady):
		return "not-ready"
	case errors.Is(err, supervise.ErrStopping):
		return "stopping"
	default:
		return "spawn-failed"
	}
}

// exhaustedCode is the code of a failed gateway-respawn record.
const exhaustedCode = codes.Unavailable

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
