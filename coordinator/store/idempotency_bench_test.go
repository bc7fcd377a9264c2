package store

import (
	"encoding/json"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/state"
)

// BenchmarkIdempotencyRecords: the cost of idempotency records at 10,000
// Agents (100,000 revisions). Two replicas of the same state take the same
// 10,000 further deploys (MaxIdempotencyRecords, the cap), one with an
// Idempotency-Key each and one without; the metrics are the snapshot size
// with the records, the snapshot bytes a record costs, its apply time, and
// the restore time with the records.
func BenchmarkIdempotencyRecords(b *testing.B) {
	const agents, revsPer, extra = 10_000, 10, state.MaxIdempotencyRecords
	keyed, plain := bigFSM(b, agents, revsPer), bigFSM(b, agents, revsPer)
	doc := json.RawMessage(`{"agents":{"defaults":{"model":{"primary":"anthropic/claude-sonnet-4-6"}}},"gateway":{"mode":"local"}}`)
	auth := &state.HarnessAuth{Method: "api_key", CredentialKind: "secret", SourceRef: "secret://ns/model#key"}
	deploy := func(f *fsm, i int, stamp *state.Idempotency) time.Duration {
		id := fmt.Sprintf("agent-%d", i%agents)
		rid := fmt.Sprintf("%s-extra-%d", id, i)
		e, err := state.EncodeStamped(state.CmdAdmitRevision.Name(), t0.Add(time.Duration(i)*time.Millisecond), "bench", stamp,
			state.AdmitRevision{WorkID: rid + "-work", MaxAttempts: 5, Revision: state.Revision{
				ID: rid, AgentID: id, NamespaceID: "ns", Document: doc, ConfigurationID: "cfg", ConfigurationGeneration: 1,
				Harness: state.HarnessIdentity{ID: state.HarnessOpenClaw, Version: "2026.9.6"}, Mode: state.ModeEmbedded,
				ComputeID: "memory", HarnessAuth: auth}})
		require.NoError(b, err)
		start := time.Now()
		r := f.Apply(&raft.Log{Index: uint64(1_000_000 + i), Data: e}).(applyResult)
		took := time.Since(start)
		require.NoError(b, r.err)
		return took
	}
	var keyedApply, plainApply time.Duration
	for i := range extra {
		keyedApply += deploy(keyed, i, &state.Idempotency{Key: fmt.Sprintf("%032x", i), Hash: fmt.Sprintf("%064x", i),
			Status: 202})
		plainApply += deploy(plain, i, nil)
	}
	require.Equal(b, extra, keyed.Machine().IdempotencyRecords())
	var withRecords, without int64
	var restore time.Duration
	b.ResetTimer()
	for range b.N {
		ks, err := keyed.capture()
		require.NoError(b, err)
		ps, err := plain.capture()
		require.NoError(b, err)
		withRecords, without = ks.Size(), ps.Size()
		start := time.Now()
		g := newFSM()
		require.NoError(b, g.Restore(io.NopCloser(ks.Reader())))
		restore += time.Since(start)
		require.Equal(b, keyed.Machine().Digest(), g.Machine().Digest())
	}
	b.StopTimer()
	b.ReportMetric(float64(withRecords)/(1<<20), "snapshot-MB")
	b.ReportMetric(float64(withRecords-without)/extra, "bytes/key")
	b.ReportMetric(float64(restore.Milliseconds())/float64(b.N), "restore-ms")
	b.ReportMetric(float64(keyedApply.Microseconds())/extra, "keyed-apply-us")
	b.ReportMetric(float64(plainApply.Microseconds())/extra, "plain-apply-us")
	b.ReportMetric(0, "ns/op")
}
