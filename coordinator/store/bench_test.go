package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/state"
)

// bigFSM builds an FSM holding agents Agents with revsPer revisions each
// (every revision admitted, its activate work queued), through Apply.
func bigFSM(tb testing.TB, agents, revsPer int) *fsm {
	tb.Helper()
	f := newFSM()
	idx := uint64(0)
	apply := func(typ state.Named, p any) {
		b, err := state.Encode(typ.Name(), t0, "bench", p)
		require.NoError(tb, err)
		idx++
		r := f.Apply(&raft.Log{Index: idx, Data: b}).(applyResult)
		require.NoError(tb, r.err, typ)
	}
	apply(state.CmdCreateNamespace, state.CreateNamespace{ID: "ns", Name: "ns"})
	doc := json.RawMessage(`{"agents":{"defaults":{"model":{"primary":"anthropic/claude-sonnet-4-6"}}},"gateway":{"mode":"local"}}`)
	apply(state.CmdPutConfiguration, state.PutConfiguration{ID: "cfg", NamespaceID: "ns", Name: "cfg", Document: doc})
	auth := &state.HarnessAuth{Method: "api_key", CredentialKind: "secret", SourceRef: "secret://ns/model#key"}
	for a := range agents {
		id := "agent-" + strconv.Itoa(a)
		apply(state.CmdCreateAgent, state.CreateAgent{ID: id, NamespaceID: "ns", Name: id, ConfigurationID: "cfg", HarnessAuth: auth})
		for r := range revsPer {
			rid := fmt.Sprintf("%s-rev-%d", id, r)
			apply(state.CmdAdmitRevision, state.AdmitRevision{WorkID: rid + "-work", MaxAttempts: 5, Revision: state.Revision{
				ID: rid, AgentID: id, NamespaceID: "ns", Document: doc, ConfigurationID: "cfg", ConfigurationGeneration: 1,
				Harness: state.HarnessIdentity{ID: state.HarnessOpenClaw, Version: "2026.9.6"}, Mode: state.ModeEmbedded,
				ComputeID: "memory", HarnessAuth: auth}})
		}
	}
	return f
}

func rssMB(tb testing.TB) float64 {
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(tb, err)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			var kb float64
			_, err := fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(line, "VmRSS:")), "%g kB", &kb)
			require.NoError(tb, err)
			return kb / 1024
		}
	}
	tb.Fatal("no VmRSS")
	return 0
}

// BenchmarkSnapshot10kAgents: 10,000 Agents / 100,000 revisions. Snapshot
// (FSM.Snapshot + Persist into a raft file snapshot sink) and restore (open
// + FSM.Restore into an empty FSM) times, snapshot size, process RSS.
func BenchmarkSnapshot10kAgents(b *testing.B) {
	const agents, revsPer = 10_000, 10
	f := bigFSM(b, agents, revsPer)
	runtime.GC()
	rss := rssMB(b)
	snaps, err := raft.NewFileSnapshotStoreWithLogger(b.TempDir(), 1, newHCLog(discardLog(), 0))
	require.NoError(b, err)
	var snapDur, marshalDur, restoreDur time.Duration
	var size int64
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		s, err := f.Snapshot()
		require.NoError(b, err)
		marshalDur += time.Since(start)
		sink, err := snaps.Create(raft.SnapshotVersionMax, 1, 1, raft.Configuration{}, 1, nil)
		require.NoError(b, err)
		require.NoError(b, s.Persist(sink))
		snapDur += time.Since(start)

		start = time.Now()
		list, err := snaps.List()
		require.NoError(b, err)
		meta, rc, err := snaps.Open(list[0].ID)
		require.NoError(b, err)
		g := newFSM()
		require.NoError(b, g.Restore(rc))
		restoreDur += time.Since(start)
		size = meta.Size
		if g.Machine().Digest() != f.Machine().Digest() {
			b.Fatal("restored state differs")
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(size)/(1<<20), "snapshot-MB")
	b.ReportMetric(float64(snapDur.Milliseconds())/float64(b.N), "snapshot-ms")
	b.ReportMetric(float64(marshalDur.Milliseconds())/float64(b.N), "marshal-ms")
	b.ReportMetric(float64(restoreDur.Milliseconds())/float64(b.N), "restore-ms")
	b.ReportMetric(rss, "rss-MB")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkBackupRestore10kAgents: the same state through SnapshotSave and
// SnapshotRestore of a one-node store (the operator's backup path).
func BenchmarkBackupRestore10kAgents(b *testing.B) {
	const agents, revsPer = 10_000, 10
	big := bigFSM(b, agents, revsPer)
	raw, err := big.encode()
	require.NoError(b, err)
	n := newNode(b, "n1", true)
	waitLeader(b, []*node{n})
	b.ResetTimer()
	var restoreDur, saveDur time.Duration
	for range b.N {
		start := time.Now()
		require.NoError(b, n.s.SnapshotRestore(ctxT(b), bytes.NewReader(raw)))
		restoreDur += time.Since(start)
		start = time.Now()
		require.NoError(b, n.s.SnapshotSave(ctxT(b), io.Discard))
		saveDur += time.Since(start)
	}
	b.StopTimer()
	require.Equal(b, big.Machine().Digest(), n.s.Machine().Digest())
	b.ReportMetric(float64(len(raw))/(1<<20), "backup-MB")
	b.ReportMetric(float64(saveDur.Milliseconds())/float64(b.N), "save-ms")
	b.ReportMetric(float64(restoreDur.Milliseconds())/float64(b.N), "restore-ms")
	b.ReportMetric(0, "ns/op")
}

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// BenchmarkPropose: raw store capacity on 3 in-process members over
// loopback TCP with fsync — sequential commit latency and the throughput of
// 64 concurrent proposers (hashicorp/raft batches concurrent applies).
func BenchmarkPropose(b *testing.B) {
	nodes := cluster(b, 3)
	l := waitLeader(b, nodes).s
	ctx := ctxT(b)
	const seq, conc, perWorker = 300, 64, 50
	b.ResetTimer()
	var lat []time.Duration
	var rate float64
	for i := range b.N {
		for j := range seq {
			start := time.Now()
			_, err := l.Propose(ctx, state.CmdCreateNamespace.Name(), state.CreateNamespace{ID: fmt.Sprintf("s%d-%d", i, j), Name: fmt.Sprintf("s%d-%d", i, j)})
			require.NoError(b, err)
			lat = append(lat, time.Since(start))
		}
		start := time.Now()
		errs := make(chan error, conc)
		for w := range conc {
			go func() {
				var err error
				for k := range perWorker {
					id := fmt.Sprintf("c%d-%d-%d", i, w, k)
					if _, e := l.Propose(ctx, state.CmdCreateNamespace.Name(), state.CreateNamespace{ID: id, Name: id}); e != nil {
						err = e
					}
				}
				errs <- err
			}()
		}
		for range conc {
			require.NoError(b, <-errs)
		}
		rate = float64(conc*perWorker) / time.Since(start).Seconds()
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2])/1e6, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100])/1e6, "p99-ms")
	b.ReportMetric(rate, "entries/s")
	b.ReportMetric(0, "ns/op")
}
