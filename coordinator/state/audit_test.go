package state

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// newClockFx is an empty fx whose clock advances a second an entry.
func newClockFx(t *testing.T) *clockFx { return &clockFx{fx: fx{t: t, m: NewMachine(), now: t0}} }

type clockFx struct{ fx }

func (c *clockFx) apply(typ Named, p any) (any, error) {
	c.t.Helper()
	defer func() { c.now = c.now.Add(time.Second) }()
	return c.fx.apply(typ, p)
}

func (c *clockFx) must(typ Named, p any) any {
	c.t.Helper()
	res, err := c.apply(typ, p)
	require.NoError(c.t, err, typ)
	return res
}

func hashOf(i int) string { return fmt.Sprintf("%064x", i+1) }

// TestTokenBounds: a principal holds at most MaxUsableTokens usable tokens
// and MaxTokenRecords records however it mints and revokes; the indexes
// follow every change and a restore rebuilds them.
func TestTokenBounds(t *testing.T) {
	a := newClockFx(t)
	a.must(CmdCreateUser, CreateUser{ID: "u1", Name: "alice"})
	a.must(CmdCreateUser, CreateUser{ID: "u2", Name: "bob"})
	exp := a.now.Add(24 * time.Hour)
	for i := range MaxUsableTokens {
		a.must(CmdCreateToken, CreateToken{ID: fmt.Sprintf("t%d", i), PrincipalKind: PrincipalUser, PrincipalID: "u1", Hash: hashOf(i), ExpiresAt: exp})
	}
	_, err := a.apply(CmdCreateToken, CreateToken{ID: "over", PrincipalKind: PrincipalUser, PrincipalID: "u1", Hash: hashOf(1000), ExpiresAt: exp})
	require.ErrorIs(t, err, ErrConflict, "the %d+1st usable token is refused", MaxUsableTokens)
	require.ErrorContains(t, err, "revoke one first")
	// Another principal is not affected; a rotation at the bound is allowed
	// (it revokes what it replaces).
	a.must(CmdCreateToken, CreateToken{ID: "b0", PrincipalKind: PrincipalUser, PrincipalID: "u2", Hash: hashOf(2000), ExpiresAt: exp})
	a.must(CmdCreateToken, CreateToken{ID: "rot", PrincipalKind: PrincipalUser, PrincipalID: "u1", Hash: hashOf(3000), ExpiresAt: exp, Replaces: "t0"})
	_, err = a.apply(CmdCreateToken, CreateToken{ID: "dup", PrincipalKind: PrincipalUser, PrincipalID: "u2", Hash: hashOf(3000), ExpiresAt: exp})
	require.ErrorIs(t, err, ErrConflict, "a recorded hash is found through the index")

	// Mint-and-revoke in a loop: the records stay bounded.
	for i := range 3 * MaxTokenRecords {
		id := fmt.Sprintf("loop%d", i)
		_, err := a.apply(CmdCreateToken, CreateToken{ID: id, PrincipalKind: PrincipalUser, PrincipalID: "u1", Hash: hashOf(10000 + i), ExpiresAt: exp})
		if err != nil {
			// At the usable bound: revoke one of the originals to make room.
			a.must(CmdRevokeToken, RevokeToken{TokenID: fmt.Sprintf("t%d", 1+i%(MaxUsableTokens-1))})
			a.must(CmdCreateToken, CreateToken{ID: id, PrincipalKind: PrincipalUser, PrincipalID: "u1", Hash: hashOf(10000 + i), ExpiresAt: exp})
		}
		a.must(CmdRevokeToken, RevokeToken{TokenID: id})
	}
	held := a.m.Tokens(PrincipalUser, "u1")
	require.LessOrEqual(t, len(held), MaxTokenRecords)
	usable := 0
	for _, tk := range held {
		if tk.Usable(a.now) {
			usable++
		}
	}
	require.LessOrEqual(t, usable, MaxUsableTokens)
	require.Len(t, a.m.Tokens(PrincipalUser, "u2"), 1)
	require.Equal(t, len(a.m.d.ids.tokens), len(a.m.d.ids.tokenByHash), "the hash index follows the records")

	b, err := a.m.MarshalSnapshot()
	require.NoError(t, err)
	m2 := NewMachine()
	require.NoError(t, m2.RestoreSnapshot(b))
	require.Equal(t, a.m.Digest(), m2.Digest())
	require.Equal(t, a.m.d.ids.tokenByHash, m2.d.ids.tokenByHash)
	require.Equal(t, a.m.d.ids.tokensOf, m2.d.ids.tokensOf)

	a.must(CmdDeleteUser, DeleteUser{UserID: "u1"})
	require.Empty(t, a.m.Tokens(PrincipalUser, "u1"))
	require.Len(t, a.m.d.ids.tokenByHash, 1, "only bob's token is left in the index")
}

// TestPruneAudit: a prune drops exactly the records through its Seq on
// every replica (records its own record), and AuditPruneThrough chooses
// the Seq from age and count.
func TestPruneAudit(t *testing.T) {
	a := newClockFx(t)
	start := a.now
	for i := range 10 {
		a.must(CmdRecordAudit, RecordAudit{Action: "oce.test", Resource: ClusterResource, Outcome: OutcomeDenied,
			Details: map[string]string{"i": fmt.Sprint(i)}})
	}
	require.Equal(t, int64(0), a.m.AuditPruneThrough(time.Time{}, 0), "no limits: nothing is due")
	require.Equal(t, int64(0), a.m.AuditPruneThrough(start, 20))
	require.Equal(t, int64(3), a.m.AuditPruneThrough(start.Add(3*time.Second), 0), "the 3 records older than 3s")
	require.Equal(t, int64(6), a.m.AuditPruneThrough(time.Time{}, 4), "keep the newest 4")
	require.Equal(t, int64(6), a.m.AuditPruneThrough(start.Add(2*time.Second), 4), "the stricter limit wins")

	_, err := a.apply(CmdPruneAudit, PruneAudit{ThroughSeq: 11})
	require.ErrorIs(t, err, ErrInvalid, "a Seq not yet appended")
	_, err = a.apply(CmdPruneAudit, PruneAudit{})
	require.ErrorIs(t, err, ErrInvalid)

	other := NewMachine()
	b, err := a.m.MarshalSnapshot()
	require.NoError(t, err)
	require.NoError(t, other.RestoreSnapshot(b))
	res := a.must(CmdPruneAudit, PruneAudit{ThroughSeq: 6}).(AuditPruned)
	require.Equal(t, AuditPruned{Records: 6, ThroughSeq: 6}, res)
	enc, err := Encode(CmdPruneAudit.Name(), a.now.Add(-time.Second), "alice", PruneAudit{ThroughSeq: 6})
	require.NoError(t, err)
	_, err = other.ApplyBytes(enc)
	require.NoError(t, err)
	require.Equal(t, a.m.Digest(), other.Digest(), "every member prunes identically")

	recs := a.m.Audit(0, 0)
	require.Len(t, recs, 5)
	require.Equal(t, int64(7), recs[0].Seq)
	last := recs[len(recs)-1]
	require.Equal(t, AuditPrune, last.Action)
	require.Equal(t, map[string]string{"records": "6", "throughSeq": "6"}, last.Details)
	n, first, lastSeq := a.m.AuditStats()
	require.Equal(t, 5, n)
	require.Equal(t, int64(7), first)
	require.Equal(t, int64(11), lastSeq)

	// Pruning again through an already pruned Seq drops nothing more.
	res = a.must(CmdPruneAudit, PruneAudit{ThroughSeq: 6}).(AuditPruned)
	require.Zero(t, res.Records)
}

// TestRecordAuditBounded: a record's strings are cut to their bounds
// (at rune boundaries), so a caller cannot store more through one.
func TestRecordAuditBounded(t *testing.T) {
	a := newClockFx(t)
	huge := strings.Repeat("é", 600<<10)
	rec := a.must(CmdRecordAudit, RecordAudit{Action: huge, Resource: huge, Outcome: OutcomeDenied,
		Details: map[string]string{huge: huge, "code": "FORBIDDEN"}}).(AuditRecord)
	require.LessOrEqual(t, len(rec.Action), MaxAuditAction)
	require.LessOrEqual(t, len(rec.Resource), MaxAuditResource)
	for k, v := range rec.Details {
		require.LessOrEqual(t, len(k), MaxAuditKey)
		require.LessOrEqual(t, len(v), MaxAuditValue)
		require.True(t, strings.HasPrefix(huge, k) || k == "code")
	}
	require.Equal(t, "FORBIDDEN", rec.Details["code"])
	require.Equal(t, "ééé", cut("éééé", 7), "cut at a rune boundary")
}

// TestAuditQueryAsksVisibleOutsideTheLock: Visible may read the machine (a
// permission check does) — under the machine's read lock that second read
// lock deadlocks with a waiting writer (an apply), which froze a leader
// whose audit was listed during activations. The batched scan returns what
// one pass over the log would, in both orders, across batch boundaries.
func TestAuditQueryAsksVisibleOutsideTheLock(t *testing.T) {
	a := newClockFx(t)
	nss := []string{"a", "b", ""}
	const records = 3*auditBatch + 7
	for i := range records {
		a.must(CmdRecordAudit, RecordAudit{Action: fmt.Sprintf("act-%d", i%2), Resource: "r",
			NamespaceID: nss[i%len(nss)], Outcome: OutcomeSuccess})
	}
	m := a.m
	all := m.AuditQuery(AuditFilter{}, 0)
	require.Len(t, all, records)
	want := func(f AuditFilter, limit int, visible map[string]bool) []int64 {
		var seqs []int64
		for i := range all {
			r := all[i]
			if f.Newest {
				r = all[len(all)-1-i]
			}
			if r.Seq <= f.After || (f.Before > 0 && r.Seq >= f.Before) || (f.Action != "" && r.Action != f.Action) || !visible[r.NamespaceID] {
				continue
			}
			if limit > 0 && len(seqs) == limit {
				break
			}
			seqs = append(seqs, r.Seq)
		}
		return seqs
	}
	visible := map[string]bool{"a": true, "": true}
	for _, tc := range []struct {
		name  string
		f     AuditFilter
		limit int
	}{
		{"all, oldest first", AuditFilter{}, 0},
		{"all, newest first", AuditFilter{Newest: true}, 0},
		{"a page across a batch boundary", AuditFilter{After: auditBatch - 3}, auditBatch + 10},
		{"newest before a cursor", AuditFilter{Newest: true, Before: 2 * auditBatch}, 5},
		{"one", AuditFilter{Action: "act-1"}, 1},
		{"filtered, more than a batch", AuditFilter{Action: "act-0"}, 2 * auditBatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			f := tc.f
			f.Visible = func(nsID string) bool {
				calls++
				// It may read the machine: a read here must not nest in the query's.
				require.True(t, m.mu.TryLock(), "Visible called under the machine's lock")
				m.mu.Unlock()
				_, _ = m.Namespace(nsID)
				return visible[nsID]
			}
			var got []int64
			for _, r := range m.AuditQuery(f, tc.limit) {
				got = append(got, r.Seq)
			}
			require.Equal(t, want(tc.f, tc.limit, visible), got)
			require.Positive(t, calls)
		})
	}
}
