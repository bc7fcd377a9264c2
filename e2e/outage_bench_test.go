package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/occ"
	"oce.dev/oce/probe/fakeprovider"
)

// outage is how long the Agent could not answer around a redeploy: the
// longest gap between two consecutive answered turns, less the median time
// an answered turn takes (a turn waiting for the gateway, `occ agent send`
// retries its dial, answers as soon as a gateway accepts it). 0 when the
// gaps are ordinary turns.
func outage(sends []sendResult) time.Duration {
	var ends, took []time.Duration
	var t0 time.Time
	for _, r := range sends {
		if !r.ok {
			continue
		}
		if t0.IsZero() {
			t0 = r.end
		}
		ends = append(ends, r.end.Sub(t0))
		took = append(took, r.end.Sub(r.start))
	}
	if len(ends) < 2 {
		return 0
	}
	var gap time.Duration
	for i := 1; i < len(ends); i++ {
		gap = max(gap, ends[i]-ends[i-1])
	}
	slices.Sort(took)
	return max(0, gap-took[len(took)/2])
}

// timedLine is one output line of a command and when it was printed.
type timedLine struct {
	at   time.Time
	text string
}

// occStream runs the occ binary and timestamps each output line as it
// arrives.
func (e *env) occStream(ctx context.Context, args ...string) ([]timedLine, int) {
	cmd := exec.CommandContext(ctx, filepath.Join(e.bin, "occ"), args...)
	cmd.Dir = e.root
	cmd.Env = append(append(os.Environ(), "OCC_SERVER=https://"+e.addr), e.extraEnv...)
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, -1
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		pw.Close()
		pr.Close()
		return nil, -1
	}
	pw.Close()
	var lines []timedLine
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		lines = append(lines, timedLine{at: time.Now(), text: sc.Text()})
	}
	pr.Close()
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return lines, ee.ExitCode()
	}
	if err != nil {
		return lines, -1
	}
	return lines, 0
}

func joinLines(ls []timedLine) string {
	var b strings.Builder
	for _, l := range ls {
		b.WriteString(l.text + "\n")
	}
	return b.String()
}

// firstNaming is when the CLI first printed code.
func firstNaming(ls []timedLine, code string) time.Time {
	for _, l := range ls {
		if strings.Contains(l.text, code) {
			return l.at
		}
	}
	return time.Time{}
}

// heldAt is when a supervisor of the revision held its startup failure
// (its "startup failure held" record in the revision's logs).
func (e *env) heldAt(t testing.TB, agentID, revID string) time.Time {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(e.devDir(), "runtimes", "*", agentID, "revisions", revID, "*.log"))
	for _, f := range logs {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, l := range strings.Split(string(b), "\n") {
			var r struct {
				Time time.Time `json:"time"`
				Msg  string    `json:"msg"`
			}
			if json.Unmarshal([]byte(l), &r) == nil && r.Msg == "gatewayd: startup failure held" {
				return r.Time
			}
		}
	}
	return time.Time{}
}

// phaseMs is the duration a revision's gatewayd recorded for a startup
// phase (its runtime.startup_phase record in gateway.log), -1 when none.
func (e *env) phaseMs(t testing.TB, agentID, revID, phase string) float64 {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(e.devDir(), "runtimes", "*", agentID, "revisions", revID, "gateway.log"))
	for _, f := range logs {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, l := range strings.Split(string(b), "\n") {
			var r struct {
				Msg   string  `json:"msg"`
				Phase string  `json:"phase"`
				Ms    float64 `json:"ms"`
			}
			if json.Unmarshal([]byte(l), &r) == nil && r.Msg == "runtime.startup_phase" && r.Phase == phase {
				return r.Ms
			}
		}
	}
	return -1
}

// redeploy runs one redeploy of agent with auth ref key while a sender
// keeps sending turns, until a turn started after the deploy (and, when the
// Agent cannot recover by itself, the operator's repair) is answered again.
// inspect sees the deploy's exit and output lines before any repair.
func (e *env) redeploy(b *testing.B, agent, key string, inspect func(code int, lines []timedLine)) time.Duration {
	e.mustOcc(b, "agent", "update", agent, "--auth-method", "api_key", "--auth-ref", "local:"+key)
	s := e.startSender(b, agent)
	// a few answered turns before the deploy, so the outage has a start
	require.Eventually(b, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		ok := 0
		for _, r := range s.sends {
			if r.ok {
				ok++
			}
		}
		return ok >= 2
	}, 2*time.Minute, 50*time.Millisecond, "the Agent answers before the redeploy")
	lines, code := e.occStream(context.Background(), "agent", "deploy", agent, "--wait", "--timeout", "8m")
	inspect(code, lines)
	a := e.agentWire(b, agent)
	if a.Status == nil || a.Status.State != "serving" {
		// The seeds' order left the Agent unavailable: the operator repairs
		// with a good key and a new deployment.
		e.mustOcc(b, "agent", "update", agent, "--auth-method", "api_key", "--auth-ref", "local:"+occ.DevDemoKey)
		e.mustOcc(b, "agent", "deploy", agent, "--wait", "--timeout", "8m")
	}
	ended := time.Now()
	deadline := ended.Add(8 * time.Minute)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		n := len(s.sends)
		answered := n > 0 && s.sends[n-1].ok && s.sends[n-1].start.After(ended)
		s.mu.Unlock()
		if answered {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	sends := s.finish()
	require.True(b, sends[len(sends)-1].ok, "the Agent answers again: %s", sends[len(sends)-1].out)
	return outage(sends)
}

// BenchmarkEmbeddedRedeployOutage measures, with the real gateway, how long
// `occ agent send` fails around an embedded redeploy, for each activation
// order of the installation (seed: the seeds' order, where the replacement
// probes the model after the Recreate cutover; before-cutover: the
// credential check and the model probe run before it), with a good key, a
// key the provider rejects and a key only a real model turn refuses; and the
// time from a held failure to `deploy --wait` naming it. Each order runs on
// its own `occ dev up`.
func BenchmarkEmbeddedRedeployOutage(b *testing.B) {
	shared.up(b) // builds the binaries once
	for _, order := range []string{"seed", "before-cutover"} {
		b.Run("order="+order, func(b *testing.B) {
			for range b.N {
				e := &env{bin: shared.bin, extraEnv: []string{"OCE_CREDENTIAL_CHECK=" + order}}
				root, err := os.MkdirTemp("", "oce-bench-")
				require.NoError(b, err)
				e.root = root
				e.addr, err = freeAddr()
				require.NoError(b, err)
				out, code := e.occBin(context.Background(), "dev", "up", "--http-addr", e.addr, "--fake-reply", FakeReply)
				require.Equal(b, 0, code, out)
				e.benchOrder(b, order)
				e.teardown()
			}
		})
	}
}

// goodRedeploys is how many good-key redeploys each environment averages.
const goodRedeploys = 2

func (e *env) benchOrder(b *testing.B, order string) {
	e.writeSecret(b, "bench-bad", "sk-bench-rejected")
	e.writeSecret(b, "bench-upfront-only", fakeprovider.UpfrontOnlyKeyPrefix+"bench")
	e.mustOcc(b, "config", "create", "c", "-f", demoFile(b, "embedded.json"))
	e.mustOcc(b, "agent", "create", "a", "--config", "c", "--auth-method", "api_key", "--auth-ref", "local:"+occ.DevDemoKey)
	e.mustOcc(b, "agent", "deploy", "a", "--wait", "--timeout", "8m")
	require.Contains(b, e.send(b, "a", "warm up"), FakeReply)
	agentID := e.agentWire(b, "a").ID
	var mu sync.Mutex
	report := func(v float64, unit string) {
		mu.Lock()
		defer mu.Unlock()
		b.ReportMetric(v, unit)
		b.Logf("order=%s %s %.1f", order, unit, v)
	}

	// Good-key redeploys, averaged: the outage, and how long the new
	// gateway's start spent in its model probe (after the cutover).
	var goodSum, probeSum float64
	for range goodRedeploys {
		good := e.redeploy(b, "a", occ.DevDemoKey, func(code int, lines []timedLine) {
			require.Equal(b, 0, code, joinLines(lines))
		})
		goodSum += good.Seconds()
		probe := e.phaseMs(b, agentID, e.agentWire(b, "a").ActiveRevisionID, "model-probe")
		require.GreaterOrEqual(b, probe, 0.0, "the new gateway records its model-probe phase")
		probeSum += probe / 1000
		b.Logf("order=%s good-key redeploy: outage %.1f s, model probe after cutover %.1f s", order, good.Seconds(), probe/1000)
	}
	report(goodSum/goodRedeploys, "s-outage-good-key")
	report(probeSum/goodRedeploys, "s-probe-after-cutover")

	bad := e.redeploy(b, "a", "bench-bad", func(code int, lines []timedLine) {
		require.Equal(b, occ.ExitFailed, code, joinLines(lines))
		require.Contains(b, joinLines(lines), "AUTHENTICATION_FAILED")
	})
	report(bad.Seconds(), "s-outage-rejected-key")

	held := e.redeploy(b, "a", "bench-upfront-only", func(code int, lines []timedLine) {
		require.Equal(b, occ.ExitFailed, code, joinLines(lines))
		rev := e.latestRevision(b, "a")
		at, named := e.heldAt(b, agentID, rev.ID), firstNaming(lines, "AUTHENTICATION_FAILED")
		require.False(b, at.IsZero(), "the runtime held the failure")
		require.False(b, named.IsZero(), joinLines(lines))
		report(named.Sub(at).Seconds(), "s-held-to-cli")
	})
	report(held.Seconds(), "s-outage-probe-refused-key")
}
