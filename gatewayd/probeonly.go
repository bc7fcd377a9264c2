package gatewayd

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"oce.dev/oce/shared/contract"
)

// The embedded model probe before cutover (contract.EnvModelProbeOnly): a
// staged replacement's gatewayd runs only its model probe while the
// predecessor serves, so a redeploy's cutover no longer waits for it and a
// candidate whose probe fails never stops the serving gateway. Seed 001 puts
// the probe "in the process that owns model access, with temporary state
// under its TMPDIR" — the probe-only gatewayd is exactly the candidate's
// model-access process, with the candidate's credential and TMPDIR; it never
// touches the Agent's gateway state the predecessor still owns.

// loadProbeEnv reads the probe-before-cutover variables.
func (c *Config) loadProbeEnv(get func(string) string) error {
	switch v := get(contract.EnvModelProbeOnly); v {
	case "", "0":
	case "1":
		c.ProbeOnly = true
	default:
		return fmt.Errorf("%w: %s", ErrBadEnv, contract.EnvModelProbeOnly)
	}
	if v := get(contract.EnvModelProbePassedAt); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms <= 0 {
			return fmt.Errorf("%w: %s", ErrBadEnv, contract.EnvModelProbePassedAt)
		}
		c.ProbePassedAt = time.UnixMilli(ms)
	}
	return nil
}

// validateProbe: only an embedded gateway probes the model.
func (c *Config) validateProbe() error {
	if (c.ProbeOnly || !c.ProbePassedAt.IsZero()) && c.Topology != contract.Embedded {
		return fmt.Errorf("%w: the model probe before cutover is for embedded gateways", ErrBadEnv)
	}
	if c.ProbeOnly && !c.ProbePassedAt.IsZero() {
		return fmt.Errorf("%w: %s and %s together", ErrBadEnv, contract.EnvModelProbeOnly, contract.EnvModelProbePassedAt)
	}
	return nil
}

// probeVouched reports whether this gateway's probe already passed before
// cutover, recently enough (contract.ModelProbeFreshFor) to stand for the
// one at its start.
func (g *Gatewayd) probeVouched() bool {
	at := g.cfg.ProbePassedAt
	if at.IsZero() {
		return false
	}
	age := time.Since(at)
	return age >= -time.Minute && age <= contract.ModelProbeFreshFor // a minute of clock skew
}

// probeOnly runs the model-probe phase alone: ready once it passed (with
// StatusModelProbe saying when), held when it failed; either way it waits
// for the stop.
func (g *Gatewayd) probeOnly(ctx, parent context.Context) int {
	b := g.renderAdmitted()
	if err := g.phases.Run(ctx, PhaseModelProbe, func(ctx context.Context) error {
		return g.probeStep(ctx, b)
	}); err != nil {
		exit, _ := g.failed(parent, PhaseModelProbe, err)
		return exit
	}
	_ = g.status.SetStatus(contract.StatusModelProbe, contract.ModelProbeStatus{Code: "READY",
		PassedAtMs: time.Now().UnixMilli()})
	g.status.SetStarted()
	g.status.SetReady(true)
	g.log.Info("model probe passed before cutover; waiting for the stop")
	select {
	case <-ctx.Done():
	case <-parent.Done():
	}
	return g.shutdown(nil)
}
