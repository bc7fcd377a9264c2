package local

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/proc"
)

// The embedded model probe before cutover (Config.ProbeBeforeCutover): a
// staged replacement runs its gatewayd in probe-only mode while the
// predecessor serves; it is ready once its probe passed, held when it
// failed. At activation the probe stops and the replacement's gateway starts
// with the time the probe passed, so the cutover waits only for the gateway
// itself.

// Readiness reasons of a staged replacement's probe.
const (
	ReasonProbing      = "model-probe-before-cutover"
	ReasonProbeExited  = "model-probe-exited"
	probeLogFile       = "probe.log"
	probeProcessRole   = "probe"
	phaseModelProbeTag = "model-probe" // gatewayd's PhaseModelProbe
)

// ensureProbe starts the staged revision's probe-only gatewayd unless it
// runs (or the installation keeps the seeds' order). Callers hold d.mu.
func (d *Driver) ensureProbe(rev state.Revision, r *revRuntime) error {
	if !d.cfg.ProbeBeforeCutover || r.Probe.Alive() || r.ProbePassedAtMs > 0 {
		return nil // running, or passed (the result stands until the cutover)
	}
	env, _ := d.gatewayEnv(rev, r)
	env = append(env, kv(contract.EnvModelProbeOnly, "1"))
	p, err := startProc(d.cfg.Runtimes.Tini, probeProcessRole, []string{d.cfg.Binaries.Gatewayd}, env,
		filepath.Join(r.dir, "gateway"), filepath.Join(r.dir, probeLogFile))
	if err != nil {
		return compute.Transient(codes.TransientDependency, err)
	}
	r.Probe, r.ProbePassedAtMs = p, 0
	d.log.Info("model probe before cutover started", "revision", rev.ID, "pid", p.PID)
	return r.save()
}

// observeProbe observes a staged replacement's probe: held with its code,
// not ready while it runs, ready (still staged) once it passed.
func (d *Driver) observeProbe(ctx context.Context, r *revRuntime, snap revRuntime) compute.Observation {
	if snap.ProbePassedAtMs > 0 {
		return compute.Observation{Ready: true, Reason: ReasonStaged, Staged: true}
	}
	addr := fmt.Sprintf("127.0.0.1:%d", snap.Ports.GatewayStatus)
	if obs, done := observeOne(ctx, snap.Probe, addr, ReasonProbeExited, ReasonProbing); done {
		if obs.Phase == "" && obs.HeldCode == "" && obs.Reason == ReasonProbing {
			obs.Phase = phaseModelProbeTag
		}
		return obs
	}
	rs, err := runtimeStatus(ctx, addr)
	if err != nil || rs.passedAtMs == 0 {
		return compute.Observation{Reason: ReasonProbing, Phase: phaseModelProbeTag}
	}
	d.mu.Lock()
	r.ProbePassedAtMs = rs.passedAtMs
	err = r.save()
	d.mu.Unlock()
	if err != nil {
		d.log.Warn("record probe result failed", "revision", r.RevisionID, "error", err.Error())
	}
	d.log.Info("model probe passed before cutover", "revision", r.RevisionID)
	return compute.Observation{Ready: true, Reason: ReasonStaged, Staged: true}
}

// stopProbe stops the revision's probe-only gatewayd, if any.
func (d *Driver) stopProbe(ctx context.Context, r *revRuntime) error {
	d.mu.Lock()
	p := r.Probe
	d.mu.Unlock()
	if !p.Alive() {
		return nil
	}
	if _, err := proc.Stop(ctx, p, d.cfg.GatewayStopWait, d.cfg.LeftoverGrace, d.cfg.PollInterval); err != nil {
		return compute.Transient(codes.TransientDependency, err)
	}
	return nil
}

// unstage starts a staged revision's gateway when no other gateway of the
// Agent runs any more (its probe stops first). Callers hold d.mu.
func (d *Driver) unstage(ctx context.Context, rev state.Revision, r *revRuntime) error {
	if r.Probe.Alive() {
		if _, err := proc.Stop(ctx, r.Probe, d.cfg.GatewayStopWait, d.cfg.LeftoverGrace, d.cfg.PollInterval); err != nil {
			return compute.Transient(codes.TransientDependency, err)
		}
	}
	return d.startGateway(ctx, rev, r)
}

// probeVouch is the EnvModelProbePassedAt value for the revision's gateway:
// its probe passed before cutover within contract.ModelProbeFreshFor, else
// "" (the gateway probes at its start).
func (d *Driver) probeVouch(r *revRuntime) string {
	if r.ProbePassedAtMs <= 0 || r.Topology != contract.Embedded {
		return ""
	}
	if age := now().Sub(time.UnixMilli(r.ProbePassedAtMs)); age < -time.Minute || age > contract.ModelProbeFreshFor {
		return ""
	}
	return strconv.FormatInt(r.ProbePassedAtMs, 10)
}
