package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/occ"
	"oce.dev/oce/probe/fakeprovider"
)

// Truthful activation (issue 14) through occ with the real runtimes, on the
// shared dev environment (its coordinator runs the default before-cutover
// activation order).

// writeDoc writes a configuration document for `occ config create -f`.
func (e *env) writeDoc(t testing.TB, name, doc string) string {
	t.Helper()
	p := filepath.Join(e.root, name)
	require.NoError(t, os.WriteFile(p, []byte(doc), 0o600))
	return p
}

// filesHolding lists the files under dir whose bytes contain s.
func filesHolding(t testing.TB, dir string, s []byte) []string {
	t.Helper()
	var hits []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return nil // a file that went away while walking
		}
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, s) {
			hits = append(hits, p)
		}
		return nil
	}))
	return hits
}

// TestConfigurationRefusals: Configuration save applies the pinned
// OpenClaw's own schema (an unknown key is 400 naming its path) and refuses
// a literal credential, which then appears in no file of the coordinator's
// data dir (Raft log, stable store, snapshots) nor any log of the dev
// environment; a harmless marker saved beside it shows the scan finds what
// was replicated.
func TestConfigurationRefusals(t *testing.T) {
	e := &shared
	e.up(t)
	out, code := e.occ(t, "config", "create", "bogus", "-f", e.writeDoc(t, "bogus.json",
		`{"gateway":{"mode":"local","bogusSetting":true}}`))
	require.NotEqual(t, 0, code, out)
	require.Contains(t, out, "INVALID_REQUEST")
	require.Contains(t, out, "gateway.bogusSetting", "the refusal names the unknown key's path")

	planted := "sk-e2e-PLANTED-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	out, code = e.occ(t, "config", "create", "leaky", "-f", e.writeDoc(t, "leaky.json",
		`{"agents":{"defaults":{"model":{"primary":"openai/gpt-5.5"},"models":{"openai/gpt-5.5":{"agentRuntime":{"id":"openclaw"}}}}},`+
			`"models":{"providers":{"openai":{"apiKey":"`+planted+`"}}}}`))
	require.NotEqual(t, 0, code, out)
	require.Contains(t, out, "INVALID_REQUEST")
	require.Contains(t, out, "models.providers.openai.apiKey")
	require.NotContains(t, out, planted)

	marker := "e2e-marker-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	e.mustOcc(t, "config", "create", "marked", "-f", e.writeDoc(t, "marked.json",
		`{"agents":{"defaults":{"model":{"primary":"openai/gpt-5.5"},"models":{"openai/gpt-5.5":{"alias":"`+marker+`","agentRuntime":{"id":"openclaw"}}}}}}`))
	_, code = e.occ(t, "config", "get", "leaky")
	require.NotEqual(t, 0, code, "the refused Configuration does not exist")

	raft := filepath.Join(e.devDir(), "coordinator")
	require.NotEmpty(t, filesHolding(t, raft, []byte(marker)), "the scan finds what the Raft log holds")
	require.Empty(t, filesHolding(t, e.devDir(), []byte(planted)), "the literal credential reached a file")
}

// sender keeps sending turns to an Agent and records each outcome.
type sender struct {
	e     *env
	agent string
	stop  chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	sends []sendResult
}

type sendResult struct {
	start, end time.Time
	ok         bool
	out        string
}

func (e *env) startSender(t testing.TB, agent string) *sender {
	s := &sender{e: e, agent: agent, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for i := 0; ; i++ {
			select {
			case <-s.stop:
				return
			default:
			}
			// A session of its own per turn: a turn a cutover interrupts
			// leaves its session to the runtime's recovery, which is not
			// what this measures.
			start := time.Now()
			out, code := e.occ(t, "agent", "send", agent, fmt.Sprintf("are you there %d", i), "--timeout", "2m",
				"--session", fmt.Sprintf("availability-%d-%d", start.UnixNano(), i))
			r := sendResult{start: start, end: time.Now(), ok: code == 0 && strings.Contains(out, FakeReply),
				out: fmt.Sprintf("exit %d: %s", code, out)}
			s.mu.Lock()
			s.sends = append(s.sends, r)
			s.mu.Unlock()
			if !r.ok {
				time.Sleep(100 * time.Millisecond) // a refused connection fails at once
			}
		}
	}()
	return s
}

// finish stops the sender after its current turn and returns every result.
func (s *sender) finish() []sendResult {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sendResult(nil), s.sends...)
}

func requireAllAnswered(t testing.TB, sends []sendResult) {
	t.Helper()
	require.NotEmpty(t, sends)
	for i, r := range sends {
		require.True(t, r.ok, "turn %d (%s after the first) failed: %s", i, r.start.Sub(sends[0].start), r.out)
	}
}

func (e *env) agentWire(t testing.TB, name string) wire.Agent {
	t.Helper()
	var a wire.Agent
	e.getJSON(t, &a, "agent", "get", name)
	return a
}

func (e *env) revisionsWire(t testing.TB, name string) []wire.Revision {
	t.Helper()
	var rs []wire.Revision
	e.getJSON(t, &rs, "revisions", name)
	return rs
}

// latestRevision is the Agent's highest-numbered revision.
func (e *env) latestRevision(t testing.TB, name string) wire.Revision {
	t.Helper()
	var last wire.Revision
	for _, r := range e.revisionsWire(t, name) {
		if r.Number > last.Number {
			last = r
		}
	}
	return last
}

// procsMentioning scans /proc for live processes whose command line,
// environment or working directory names s (a revision or Agent ID: every
// supervisor carries it in OCE_REVISION_ID / OCE_AGENT_ID, its children run
// in its directories).
func procsMentioning(s string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if f := statFields(pid); len(f) < 1 || f[0] == "Z" {
			continue
		}
		hit := false
		for _, name := range []string{"cmdline", "environ"} {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
			hit = hit || bytes.Contains(b, []byte(s))
		}
		if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err == nil && strings.Contains(cwd, s) {
			hit = true
		}
		if hit {
			out = append(out, pid)
		}
	}
	return out
}

// procWatch samples procsMentioning for the Agent's next revision while a
// deploy runs, so a test can show it saw the candidate's processes.
type procWatch struct {
	stop, done chan struct{}
	mu         sync.Mutex
	revID      string
	seen       int
}

func (e *env) watchCandidate(t testing.TB, agent string, after int64) *procWatch {
	w := &procWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			var rs []wire.Revision
			out, code := e.occ(t, "-o", "json", "revisions", agent)
			if code != 0 || json.Unmarshal([]byte(out), &rs) != nil {
				continue
			}
			for _, r := range rs {
				if r.Number > after {
					n := len(procsMentioning(r.ID))
					w.mu.Lock()
					w.revID, w.seen = r.ID, max(w.seen, n)
					w.mu.Unlock()
				}
			}
		}
	}()
	return w
}

func (w *procWatch) finish() (string, int) {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.revID, w.seen
}

// TestEmbeddedActivationTruth walks one embedded Agent through the truthful
// activation items with the real gateway: a rejected key and a key only a
// real model turn refuses are both held before cutover while the Agent keeps
// answering every turn, deploy --wait naming the runtime phase and the code;
// the failed candidate leaves no process; an opt-in rollback reactivates the
// exact predecessor, which answers again, with the cause audited; a stop
// cancels a pending activation and leaves nothing running.
func TestEmbeddedActivationTruth(t *testing.T) {
	e := &shared
	e.up(t)
	step := stepper(t)
	e.mustOcc(t, "config", "create", "truth-cfg", "-f", demoFile(t, "embedded.json"))
	e.mustOcc(t, "agent", "create", "truth", "--config", "truth-cfg", "--auth-method", "api_key", "--auth-ref", "local:"+occ.DevDemoKey)
	e.mustOcc(t, "agent", "deploy", "truth", "--wait", "--timeout", "8m")
	a := e.agentWire(t, "truth")
	first := a.ActiveRevisionID
	require.NotEmpty(t, first)
	require.Equal(t, wire.AgentServing, a.Status.State)
	require.Contains(t, e.send(t, "truth", "hello"), FakeReply)
	step("deployed")

	// The serving gateway's supervisor: it must never stop while a
	// candidate is refused before cutover.
	serving := e.agentProcs(t, a.ID)
	require.NotEmpty(t, serving)

	// A key the provider rejects: the coordinator's check holds it before
	// cutover; the serving revision keeps answering.
	e.writeSecret(t, "truth-bad", "sk-truth-rejected")
	e.mustOcc(t, "agent", "update", "truth", "--auth-method", "api_key", "--auth-ref", "local:truth-bad")
	s := e.startSender(t, "truth")
	out, code := e.occ(t, "agent", "deploy", "truth", "--wait", "--timeout", "5m")
	requireAllAnswered(t, s.finish())
	require.Equal(t, occ.ExitFailed, code, out)
	require.Contains(t, out, "AUTHENTICATION_FAILED", out)
	require.Contains(t, out, "credential", "the credential check says so")
	require.Equal(t, first, e.agentWire(t, "truth").ActiveRevisionID)
	step("rejected key held")

	// A key only a real model turn refuses: the credential check passes, the
	// candidate's model probe runs before cutover and holds it.
	e.writeSecret(t, "truth-upfront-only", fakeprovider.UpfrontOnlyKeyPrefix+"e2e")
	e.mustOcc(t, "agent", "update", "truth", "--auth-method", "api_key", "--auth-ref", "local:truth-upfront-only")
	before := e.latestRevision(t, "truth").Number
	s = e.startSender(t, "truth")
	w := e.watchCandidate(t, "truth", before)
	out, code = e.occ(t, "agent", "deploy", "truth", "--wait", "--timeout", "5m")
	candidate, seen := w.finish()
	sends := s.finish()
	requireAllAnswered(t, sends)
	require.Equal(t, occ.ExitFailed, code, out)
	require.Contains(t, out, "runtime model-probe", "deploy --wait shows the runtime's phase")
	require.Contains(t, out, "AUTHENTICATION_FAILED", out)
	require.Equal(t, first, e.agentWire(t, "truth").ActiveRevisionID, "the predecessor was never cut over")
	require.Positive(t, seen, "the candidate's probe processes were seen while it ran")
	require.Empty(t, procsMentioning(candidate), "the failed candidate left a process")
	require.True(t, serving[0].alive(), "the serving gateway kept running throughout")
	t.Logf("%d turns answered while the candidate probed", len(sends))
	step("probe held before cutover")

	// Rollback (opt-in): a new revision not observed ready within the
	// window is replaced by the exact previous revision.
	e.mustOcc(t, "agent", "update", "truth", "--auth-method", "api_key", "--auth-ref", "local:"+occ.DevDemoKey,
		"--rollback-window", "2s")
	out, code = e.occ(t, "agent", "deploy", "truth", "--wait", "--timeout", "8m")
	require.Equal(t, occ.ExitFailed, code, out)
	rolled := e.latestRevision(t, "truth")
	require.Eventually(t, func() bool {
		a := e.agentWire(t, "truth")
		return a.ActiveRevisionID == first && a.Status != nil && a.Status.State == wire.AgentServing
	}, 8*time.Minute, 500*time.Millisecond, "the exact predecessor serves again")
	require.Contains(t, e.send(t, "truth", "back again"), FakeReply, "the predecessor answers again")
	var rollback *wire.AuditRecord
	var recs []wire.AuditRecord
	e.getJSON(t, &recs, "audit", "--limit", "1000")
	for i, r := range recs {
		if r.AgentID == a.ID && r.Action == wire.AuditRollback {
			require.Nil(t, rollback, "one rollback")
			rollback = &recs[i]
		}
	}
	require.NotNil(t, rollback, "the rollback is audited")
	require.Equal(t, first, rollback.RevisionID)
	require.Equal(t, rolled.ID, rollback.Details["from"])
	require.Contains(t, rollback.Details["cause"], "not ready within 2s", "the audit says why")
	require.Equal(t, wire.RevisionFailed, e.latestRevision(t, "truth").Status)
	e.mustOcc(t, "agent", "update", "truth", "--rollback=false")
	step("rolled back")

	// A stop cancels a pending activation and leaves nothing running.
	e.mustOcc(t, "agent", "deploy", "truth")
	pending := e.latestRevision(t, "truth")
	e.mustOcc(t, "agent", "stop", "truth")
	require.Eventually(t, func() bool {
		a := e.agentWire(t, "truth")
		return a.ActiveRevisionID == "" && a.Status != nil && a.Status.State == wire.AgentStopped
	}, 8*time.Minute, 500*time.Millisecond)
	var pend wire.Revision
	for _, r := range e.revisionsWire(t, "truth") {
		if r.ID == pending.ID {
			pend = r
		}
	}
	require.Equal(t, wire.RevisionStopped, pend.Status, "%+v", pend)
	require.Equal(t, "ACTIVATION_CANCELED", pend.FailureCode)
	require.Empty(t, procsMentioning(a.ID), "a stopped Agent runs nothing")
	step("stop canceled")

	e.mustOcc(t, "agent", "delete", "truth")
	require.Eventually(t, func() bool {
		_, code := e.occ(t, "agent", "get", "truth")
		return code != 0
	}, 5*time.Minute, 200*time.Millisecond)
	step("deleted")
}
