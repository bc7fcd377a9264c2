package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// randomEntries builds a seeded, random-ish log over a small id space, so
// many commands succeed and many are rejected.
func randomEntries(t testing.TB, seed uint64, n int) [][]byte {
	rng := rand.New(rand.NewPCG(seed, 7))
	pick := func(prefix string, k int) string { return fmt.Sprintf("%s%d", prefix, rng.IntN(k)) }
	now := t0
	var out [][]byte
	var works, revs []string
	var stamp *Idempotency
	enc := func(typ Named, p any) {
		b, err := EncodeStamped(typ.Name(), now, "alice", stamp, p)
		require.NoError(t, err)
		out = append(out, b)
		stamp = nil
	}
	// keyed stamps a resource command with one of a few keys and hashes, so
	// records are made, replayed, refused for another hash and evicted.
	keyed := func() {
		if rng.IntN(2) == 0 {
			stamp = &Idempotency{Key: pick("k", 8), Hash: pick("h", 2), Status: 201}
		}
	}
	enc(CmdCreateNamespace, CreateNamespace{ID: "ns0", Name: "zero"})
	enc(CmdPutConfiguration, PutConfiguration{ID: "c0", NamespaceID: "ns0", Name: "c0", Document: json.RawMessage(`{}`)})
	enc(CmdPutConfiguration, PutConfiguration{ID: "c1", NamespaceID: "ns0", Name: "c1", Document: json.RawMessage(`{}`)})
	for i := range 3 {
		enc(CmdCreateAgent, CreateAgent{ID: fmt.Sprintf("a%d", i), NamespaceID: "ns0", Name: fmt.Sprintf("n%d", i), ConfigurationID: "c0"})
	}
	for len(out) < n {
		now = now.Add(time.Duration(rng.IntN(700)) * time.Millisecond)
		if rng.IntN(400) == 0 {
			now = now.Add(IdempotencyTTL) // every record expires
		}
		recent := func(ids []string) string {
			if len(ids) == 0 {
				return "none"
			}
			return ids[len(ids)-1-rng.IntN(min(len(ids), 4))]
		}
		wid, owner := recent(works), []string{"o0", "o0", "o0", "o1"}[rng.IntN(4)]
		cr := ClaimRef{WorkID: wid, Owner: owner}
		fresh := func() string { works = append(works, fmt.Sprintf("w%d", len(out))); return works[len(works)-1] }
		var typ Named
		var p any
		switch rng.IntN(16) {
		case 0:
			keyed()
			typ, p = CmdCreateNamespace, CreateNamespace{ID: pick("ns", 2), Name: pick("name", 3)}
		case 1:
			if rng.IntN(8) != 0 {
				typ, p = CmdClaimWork, ClaimWork{WorkID: wid, Owner: owner, LeaseExpiry: now.Add(5 * time.Second)}
				break
			}
			typ, p = CmdPutConfiguration, PutConfiguration{ID: "c1", NamespaceID: "ns0", Name: pick("c", 3),
				Document: json.RawMessage(fmt.Sprintf(`{"v": %d}`, rng.IntN(5)))}
		case 2:
			keyed()
			typ, p = CmdCreateAgent, CreateAgent{ID: pick("a", 3), NamespaceID: "ns0", Name: pick("n", 4), ConfigurationID: pick("c", 2)}
		case 3, 4:
			revs = append(revs, fmt.Sprintf("r%d", len(out)))
			r := rev(revs[len(revs)-1], pick("a", 3), int64(1+rng.IntN(4)/3))
			r.NamespaceID, r.ConfigurationID = "ns0", "c0"
			keyed()
			typ, p = CmdAdmitRevision, AdmitRevision{Revision: r, WorkID: fresh(), MaxAttempts: 1 + rng.IntN(3)}
		case 5:
			typ, p = CmdClaimWork, ClaimWork{WorkID: wid, Owner: owner, LeaseExpiry: now.Add(5 * time.Second)}
		case 6:
			if rng.IntN(4) == 0 {
				typ, p = CmdReleaseClaims, ReleaseClaims{Keep: owner}
				break
			}
			typ, p = CmdClaimWork, ClaimWork{WorkID: wid, Owner: owner, LeaseExpiry: now.Add(5 * time.Second)}
		case 7:
			typ, p = CmdActivateRevision, ActivateRevision{ClaimRef: cr, Expected: []string{"", recent(revs)}[rng.IntN(2)]}
		case 8:
			typ, p = CmdCompleteActivation, CompleteActivation{ClaimRef: cr}
		case 9:
			typ, p = CmdRequeueWork, RequeueWork{ClaimRef: cr, Code: "X", AvailableAt: now.Add(time.Second), Defer: rng.IntN(2) == 0}
		case 10:
			typ, p = CmdRecordPredecessor, RecordPredecessorStop{ClaimRef: cr, RevisionID: recent(revs), NextCheckAt: now.Add(5 * time.Second)}
		case 11:
			typ, p = CmdSupersedeWork, SupersedeWork{ClaimRef: cr}
		case 12:
			if rng.IntN(4) != 0 {
				typ, p = CmdActivateRevision, ActivateRevision{ClaimRef: cr, Expected: ""}
				break
			}
			keyed()
			typ, p = CmdRequestStop, RequestStop{AgentID: pick("a", 3), WorkID: fresh()}
		case 13:
			typ, p = CmdCompleteStop, CompleteStop{ClaimRef: cr, Expected: recent(revs)}
		case 14:
			if len(out) > n*9/10 && rng.IntN(10) == 0 {
				typ, p = CmdRequestDelete, RequestDelete{AgentID: pick("a", 3), WorkID: fresh()}
			} else {
				typ, p = CmdCompleteDeletion, CompleteDeletion{ClaimRef: cr}
			}
		case 15:
			typ, p = CmdFailWork, FailWork{ClaimRef: cr, Code: "RUNTIME_STARTUP_FAILED"}
		}
		enc(typ, p)
	}
	return out
}

// applyAll applies entries and returns the error sentinel outcome per entry.
// With checkMutation it also verifies (expensively) that rejected entries
// left the Digest unchanged.
func applyAll(m *Machine, entries [][]byte, checkMutation ...bool) []string {
	var outcomes []string
	check := len(checkMutation) > 0 && checkMutation[0]
	for _, e := range entries {
		var before string
		if check {
			before = m.Digest()
		}
		_, err := m.ApplyBytes(e)
		switch {
		case err == nil:
			outcomes = append(outcomes, "ok")
		default:
			if check && m.Digest() != before {
				outcomes = append(outcomes, "MUTATED-ON-ERROR")
			}
			for _, s := range []error{ErrNotFound, ErrConflict, ErrInvalid, ErrNotClaimable, ErrClaimLost, ErrActiveRevisionChanged,
				ErrIdempotencyMismatch} {
				if errors.Is(err, s) {
					outcomes = append(outcomes, s.Error())
				}
			}
		}
	}
	return outcomes
}

func TestDeterminism(t *testing.T) {
	for seed := range uint64(4) {
		entries := randomEntries(t, seed, 1500)
		a, b := NewMachine(), NewMachine()
		oa, ob := applyAll(a, entries, seed == 0), applyAll(b, entries)
		require.Equal(t, oa, ob)
		require.NotContains(t, oa, "MUTATED-ON-ERROR")
		require.Equal(t, a.Digest(), b.Digest())
		ok := 0
		for _, o := range oa {
			if o == "ok" {
				ok++
			}
		}
		require.Greater(t, ok, 100, "the generated log must exercise successful commands too")

		// Snapshot half-way, restore into a fresh machine, continue both.
		half := len(entries) / 2
		c, d := NewMachine(), NewMachine()
		applyAll(c, entries[:half])
		snap, err := c.MarshalSnapshot()
		require.NoError(t, err)
		require.NoError(t, d.RestoreSnapshot(snap))
		require.Equal(t, c.Digest(), d.Digest())
		snap2, err := d.MarshalSnapshot()
		require.NoError(t, err)
		require.Equal(t, snap, snap2, "restore is lossless")
		require.Equal(t, applyAll(c, entries[half:]), applyAll(d, entries[half:]))
		require.Equal(t, a.Digest(), c.Digest())
		require.Equal(t, c.Digest(), d.Digest())
	}
}

func TestRestoreRejectsGarbage(t *testing.T) {
	f := newFx(t)
	before := f.m.Digest()
	for _, b := range []string{`{}`, `{"version":1,"bogus":true}`, `nope`, `{"version":1,"predecessorStops":[[]]}`} {
		require.ErrorIs(t, f.m.RestoreSnapshot([]byte(b)), ErrInvalid, b)
		require.Equal(t, before, f.m.Digest())
	}
}

func FuzzApplyBytes(f *testing.F) {
	for _, e := range randomEntries(f, 1, 40) {
		f.Add(e)
	}
	f.Add([]byte(`{"type":"ClaimWork","time":"2026-11-29T09:00:00Z","payload":{"workId":"w1","owner":"o","leaseExpiry":"2026-11-29T09:00:05Z"}}`))
	f.Fuzz(func(t *testing.T, entry []byte) {
		fx := newFx(t)
		fx.admit("r1", "w1")
		fx.admit("r2", "w2")
		fx.claim("w2", "o")
		before := fx.m.Digest()
		_, err := fx.m.ApplyBytes(entry)
		if err != nil {
			require.Equal(t, before, fx.m.Digest(), "a failed apply changes nothing")
		}
		// Whatever happened, the state must survive a snapshot round trip.
		snap, err := fx.m.MarshalSnapshot()
		require.NoError(t, err)
		m2 := NewMachine()
		require.NoError(t, m2.RestoreSnapshot(snap))
		require.Equal(t, fx.m.Digest(), m2.Digest())
	})
}

func TestDeterminismLogExercisesLifecycle(t *testing.T) {
	m := NewMachine()
	applyAll(m, randomEntries(t, 3, 3000))
	actions := map[string]int{}
	for _, a := range m.Audit(0, 0) {
		actions[a.Action]++
	}
	require.Positive(t, actions[AuditDeploy], actions)
	require.Positive(t, actions[AuditActivate], actions)
}
