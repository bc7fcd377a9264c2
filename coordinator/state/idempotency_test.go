package state

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// keyed applies a command stamped with key and hash as actor.
func (f *fx) keyed(actor, key, hash string, typ Named, p any) (any, error) {
	f.t.Helper()
	b, err := EncodeStamped(typ.Name(), f.now, actor, &Idempotency{Key: key, Hash: hash, Status: 201}, p)
	require.NoError(f.t, err)
	return f.m.ApplyBytes(b)
}

func agentCmd(id, name string) CreateAgent {
	return CreateAgent{ID: id, NamespaceID: "ns1", Name: name, ConfigurationID: "c1"}
}

func TestIdempotentCommandTakesEffectOnce(t *testing.T) {
	f := newFx(t)
	res, err := f.keyed("alice", "k1", "h1", CmdCreateAgent, agentCmd("a2", "two"))
	require.NoError(t, err)
	created := res.(Agent)
	rec, ok := f.m.IdempotencyRecord("alice", "k1", f.now)
	require.True(t, ok)
	require.Equal(t, IdempotencyRecord{Actor: "alice", Key: "k1", Hash: "h1", Status: 201, Type: CmdCreateAgent.Name(),
		Result: rec.Result, CreatedAt: t0, ExpiresAt: t0.Add(IdempotencyTTL)}, rec)
	var fromRecord Agent
	require.NoError(t, json.Unmarshal(rec.Result, &fromRecord))
	require.Equal(t, created, fromRecord)

	// The retry mints another id (the API does per attempt): the recorded
	// result comes back and nothing changes.
	f.now = f.now.Add(time.Minute)
	digest, applied := f.m.Digest(), f.m.Applied()
	res, err = f.keyed("alice", "k1", "h1", CmdCreateAgent, agentCmd("a3", "two"))
	require.NoError(t, err)
	require.Equal(t, &Replay{Record: rec}, res)
	require.Equal(t, digest, f.m.Digest())
	require.Equal(t, applied, f.m.Applied(), "a replay is not a state change")
	require.Len(t, f.m.Agents("ns1"), 2)

	// The same key for a different request is refused, changing nothing.
	_, err = f.keyed("alice", "k1", "h2", CmdCreateAgent, agentCmd("a4", "four"))
	require.ErrorIs(t, err, ErrIdempotencyMismatch)
	require.Equal(t, digest, f.m.Digest())

	// Keys are per actor.
	_, err = f.keyed("bob", "k1", "h2", CmdCreateAgent, agentCmd("a4", "four"))
	require.NoError(t, err)
	require.Len(t, f.m.Agents("ns1"), 3)
}

func TestRefusedKeyedCommandLeavesNoRecord(t *testing.T) {
	f := newFx(t)
	digest := f.m.Digest()
	_, err := f.keyed("alice", "k1", "h1", CmdCreateAgent, agentCmd("a2", "bot")) // name taken
	require.ErrorIs(t, err, ErrConflict)
	require.Equal(t, digest, f.m.Digest())
	_, ok := f.m.IdempotencyRecord("alice", "k1", f.now)
	require.False(t, ok)
	// Evaluated afresh, the repeat may succeed.
	_, err = f.keyed("alice", "k1", "h2", CmdCreateAgent, agentCmd("a2", "free"))
	require.NoError(t, err)
}

func TestIdempotencyRecordsExpireByEntryTime(t *testing.T) {
	f := newFx(t)
	_, err := f.keyed("alice", "k1", "h1", CmdCreateAgent, agentCmd("a2", "two"))
	require.NoError(t, err)
	f.now = t0.Add(IdempotencyTTL - time.Nanosecond)
	res, err := f.keyed("alice", "k1", "h1", CmdCreateAgent, agentCmd("a3", "three"))
	require.NoError(t, err)
	require.IsType(t, &Replay{}, res)
	f.now = t0.Add(IdempotencyTTL)
	_, ok := f.m.IdempotencyRecord("alice", "k1", f.now)
	require.False(t, ok, "expired at its ExpiresAt")
	res, err = f.keyed("alice", "k1", "h2", CmdCreateAgent, agentCmd("a3", "three"))
	require.NoError(t, err)
	require.Equal(t, "a3", res.(Agent).ID, "an expired key is a new key")
	require.Equal(t, 1, f.m.IdempotencyRecords(), "the expired record was replaced")
}

func TestIdempotencyRecordsAreBounded(t *testing.T) {
	f := newFx(t)
	const extra = 5
	for i := range MaxIdempotencyRecords + extra {
		_, err := f.keyed("alice", fmt.Sprintf("k%d", i), "h", CmdCreateNamespace,
			CreateNamespace{ID: fmt.Sprintf("id%d", i), Name: fmt.Sprintf("n%d", i)})
		require.NoError(t, err)
	}
	require.Equal(t, MaxIdempotencyRecords, f.m.IdempotencyRecords())
	for i := range extra {
		_, ok := f.m.IdempotencyRecord("alice", fmt.Sprintf("k%d", i), f.now)
		require.False(t, ok, "the oldest records are evicted first")
	}
	_, ok := f.m.IdempotencyRecord("alice", fmt.Sprintf("k%d", MaxIdempotencyRecords+extra-1), f.now)
	require.True(t, ok)

	// The bounded set survives a snapshot in order: the next eviction on
	// both replicas drops the same record.
	snap, err := f.m.MarshalSnapshot()
	require.NoError(t, err)
	g := &fx{t: t, m: NewMachine(), now: f.now}
	require.NoError(t, g.m.RestoreSnapshot(snap))
	for _, m := range []*fx{f, g} {
		_, err := m.keyed("alice", "last", "h", CmdCreateNamespace, CreateNamespace{ID: "idl", Name: "last"})
		require.NoError(t, err)
	}
	require.Equal(t, f.m.Digest(), g.m.Digest())
	_, ok = g.m.IdempotencyRecord("alice", fmt.Sprintf("k%d", extra), g.now)
	require.False(t, ok)
}

func TestInvalidIdempotencyStamp(t *testing.T) {
	f := newFx(t)
	for _, st := range []Idempotency{{Hash: "h", Status: 201}, {Key: "k", Status: 201}, {Key: "k", Hash: "h"},
		{Key: string(bytes.Repeat([]byte("k"), MaxIdempotencyKeyLen+1)), Hash: "h", Status: 201}} {
		b, err := EncodeStamped(CmdCreateAgent.Name(), f.now, "alice", &st, agentCmd("a2", "two"))
		require.NoError(t, err)
		_, err = f.m.ApplyBytes(b)
		require.ErrorIs(t, err, ErrInvalid, "%+v", st)
	}
	require.Len(t, f.m.Agents("ns1"), 1)
}

// TestSnapshotKeepsIdempotencyRecords: records survive a snapshot, and a
// replica restored from it replays the same key the same way.
func TestSnapshotKeepsIdempotencyRecords(t *testing.T) {
	f := newFx(t)
	_, err := f.keyed("alice", "k1", "h1", CmdAdmitRevision, AdmitRevision{Revision: rev("r1", "a1", 1), WorkID: "w1"})
	require.NoError(t, err)
	snap, err := f.m.MarshalSnapshot()
	require.NoError(t, err)
	g := &fx{t: t, m: NewMachine(), now: f.now}
	require.NoError(t, g.m.RestoreSnapshot(snap))
	require.Equal(t, f.m.Digest(), g.m.Digest())
	res, err := g.keyed("alice", "k1", "h1", CmdAdmitRevision, AdmitRevision{Revision: rev("r2", "a1", 1), WorkID: "w2"})
	require.NoError(t, err)
	var adm Admitted
	require.NoError(t, json.Unmarshal(res.(*Replay).Record.Result, &adm))
	require.Equal(t, "r1", adm.Revision.ID)
	require.Equal(t, "w1", adm.WorkID)
	require.Len(t, g.m.Revisions("a1"), 1)
}

// TestIdempotencySection: records travel in the snapshot's "idempotency"
// section; a snapshot naming a section this release does not know is
// refused and changes nothing.
func TestIdempotencySection(t *testing.T) {
	f := newFx(t)
	_, err := f.keyed("alice", "k1", "h1", CmdCreateAgent, agentCmd("a2", "two"))
	require.NoError(t, err)
	snap, err := f.m.MarshalSnapshot()
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(snap, append([]byte(snapMagic), binary.AppendUvarint(nil, snapshotVersionSections)...)))
	require.Equal(t, 1, bytes.Count(snap, []byte("idempotency")))

	g := newFx(t)
	before := g.m.Digest()
	bad := bytes.Replace(snap, []byte("idempotency"), []byte("idempotencx"), 1)
	require.ErrorIs(t, g.m.RestoreSnapshot(bad), ErrInvalid)
	require.Equal(t, before, g.m.Digest())
	require.NoError(t, g.m.RestoreSnapshot(snap))
	require.Equal(t, f.m.Digest(), g.m.Digest())
}

func TestReleaseClaimsFreesForeignClaimsAtOnce(t *testing.T) {
	f := newFx(t)
	f.must(CmdCreateAgent, CreateAgent{ID: "a2", NamespaceID: "ns1", Name: "bot2", ConfigurationID: "c1"})
	f.admit("r1", "w1")
	f.must(CmdAdmitRevision, AdmitRevision{Revision: rev("r2", "a2", 1), WorkID: "w2", MaxAttempts: 3})
	f.claim("w1", "old/1")
	f.claim("w2", "new/2")
	f.now = f.now.Add(time.Second) // both leases still live

	_, err := f.apply(CmdReleaseClaims, ReleaseClaims{})
	require.ErrorIs(t, err, ErrInvalid)
	res := f.must(CmdReleaseClaims, ReleaseClaims{Keep: "new/2"})
	require.Equal(t, []string{"w1"}, res)
	w1, _ := f.m.Work("w1")
	require.Equal(t, WorkQueued, w1.State)
	require.Empty(t, w1.Owner)
	require.Equal(t, CodeLeaderChanged, w1.LastCode)
	require.Equal(t, f.now, w1.AvailableAt)
	require.Equal(t, 1, w1.Attempts, "the interrupted attempt counts, as after a lapsed lease")
	w2, _ := f.m.Work("w2")
	require.Equal(t, WorkClaimed, w2.State, "the keeper's own claim stays")

	// The old owner can write nothing more; the new one claims at once.
	_, err = f.apply(CmdSetWorkPhase, SetWorkPhase{ClaimRef: ref("w1", "old/1"), Phase: PhasePreparing})
	require.ErrorIs(t, err, ErrClaimLost)
	_, err = f.apply(CmdActivateRevision, ActivateRevision{ClaimRef: ref("w1", "old/1")})
	require.ErrorIs(t, err, ErrClaimLost)
	require.Equal(t, []Work{w1}, f.m.Claimable(f.now))
	f.claim("w1", "new/2")
}
