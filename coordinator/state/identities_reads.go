package state

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"time"
)

// Reads of identity data; each returns copies in a deterministic order.

// User returns one user.
func (m *Machine) User(id string) (User, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	u, ok := m.d.ids.users[id]
	return cloneUser(u), ok
}

// UserByName returns the user named name.
func (m *Machine) UserByName(name string) (User, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	id, ok := m.d.ids.userByName[name]
	if !ok {
		return User{}, false
	}
	return cloneUser(m.d.ids.users[id]), true
}

// Users returns every user ordered by name.
func (m *Machine) Users() []User {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return sortedValues(m.d.ids.users, func(User) bool { return true }, cloneUser,
		func(a, b User) int { return cmp.Compare(a.Name, b.Name) })
}

// ServicePrincipal returns one service principal.
func (m *Machine) ServicePrincipal(id string) (ServicePrincipal, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	sp, ok := m.d.ids.sps[id]
	return sp, ok
}

// ServicePrincipalByName returns the service principal named name in a Namespace.
func (m *Machine) ServicePrincipalByName(nsID, name string) (ServicePrincipal, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	id, ok := m.d.ids.spByName[nameKey{nsID, name}]
	if !ok {
		return ServicePrincipal{}, false
	}
	return m.d.ids.sps[id], true
}

// ServicePrincipals returns a Namespace's service principals ("" = all) by name.
func (m *Machine) ServicePrincipals(nsID string) []ServicePrincipal {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return sortedValues(m.d.ids.sps, func(sp ServicePrincipal) bool { return nsID == "" || sp.NamespaceID == nsID },
		func(sp ServicePrincipal) ServicePrincipal { return sp },
		func(a, b ServicePrincipal) int {
			return cmp.Or(cmp.Compare(a.NamespaceID, b.NamespaceID), cmp.Compare(a.Name, b.Name))
		})
}

// Token returns one token record.
func (m *Machine) Token(id string) (Token, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	t, ok := m.d.ids.tokens[id]
	return t, ok
}

// Tokens returns the tokens of one principal (kind "" = every token) by
// creation time.
func (m *Machine) Tokens(kind, principalID string) []Token {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if kind != "" {
		return m.d.ids.tokensOfPrincipal(kind, principalID)
	}
	return sortedValues(m.d.ids.tokens, func(t Token) bool {
		return kind == "" || (t.PrincipalKind == kind && t.PrincipalID == principalID)
	}, func(t Token) Token { return t }, func(a, b Token) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
}

// UsableTokens counts the tokens of one principal that authenticate at
// now (through the per-principal index).
func (m *Machine) UsableTokens(kind, principalID string, now time.Time) int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n := 0
	for id := range m.d.ids.tokensOf[principalKey{kind, principalID}] {
		if m.d.ids.tokens[id].Usable(now) {
			n++
		}
	}
	return n
}

// RoleBinding returns one role binding.
func (m *Machine) RoleBinding(id string) (RoleBinding, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	b, ok := m.d.ids.bindings[id]
	return cloneBinding(b), ok
}

// RoleBindings returns every role binding ordered by ID.
func (m *Machine) RoleBindings() []RoleBinding {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return sortedValues(m.d.ids.bindings, func(RoleBinding) bool { return true },
		cloneBinding, func(a, b RoleBinding) int { return cmp.Compare(a.ID, b.ID) })
}

// Restriction returns one Restriction.
func (m *Machine) Restriction(id string) (Restriction, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	r, ok := m.d.ids.restrictions[id]
	return r, ok
}

// Restrictions returns every Restriction ordered by name.
func (m *Machine) Restrictions() []Restriction {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return sortedValues(m.d.ids.restrictions, func(Restriction) bool { return true },
		func(r Restriction) Restriction { return r }, func(a, b Restriction) int { return cmp.Compare(a.Name, b.Name) })
}

// IdentityGeneration changes whenever identity data (users, service
// principals, tokens, role bindings, Restrictions) may have changed on this
// replica, so caches of derived data (the IAM driver's compiled policies)
// know when to rebuild. It is not replicated state.
func (m *Machine) IdentityGeneration() uint64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.idGen
}

// AuditFilter selects audit records; empty fields match everything.
type AuditFilter struct {
	After  int64 // Seq > After
	Before int64 // Seq < Before when positive (the newest-first cursor)
	// Newest walks the log from its end: the newest matching records,
	// newest first.
	Newest      bool
	Actor       string
	NamespaceID string
	Action      string
	Since       time.Time // Time >= Since
	Until       time.Time // Time < Until
	// Visible, when set, must accept a record's Namespace ID ("" for
	// cluster-wide records) for it to be returned. It is called without the
	// machine's lock held, so it may read the machine (a permission check
	// does): under the lock a second read lock would deadlock with a
	// waiting writer.
	Visible func(nsID string) bool
}

// auditBatch is the least a scan of AuditQuery copies under the lock: the
// records it hands to Visible outside it.
const auditBatch = 256

// AuditQuery returns up to limit matching records in Seq order, or with
// f.Newest the newest ones in reverse Seq order (limit <= 0 means all). It
// scans under the lock in batches and asks f.Visible between them, outside
// the lock; each batch resumes after the last record seen, so records
// appended or pruned meanwhile are handled as a cursor would.
func (m *Machine) AuditQuery(f AuditFilter, limit int) []AuditRecord {
	out := []AuditRecord{}
	for {
		n := auditBatch
		if limit > 0 {
			n = max(n, limit-len(out))
		}
		batch, more := m.auditScan(f, n)
		for _, r := range batch {
			if f.Visible != nil && !f.Visible(r.NamespaceID) {
				continue
			}
			out = append(out, r)
			if limit > 0 && len(out) == limit {
				return out
			}
		}
		if !more {
			return out
		}
		if last := batch[len(batch)-1].Seq; f.Newest {
			f.Before = last
		} else {
			f.After = last
		}
	}
}

// auditScan copies up to n records matching f but for Visible, in f's
// order; more reports whether it stopped at n.
func (m *Machine) auditScan(f AuditFilter, n int) (batch []AuditRecord, more bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	bySeq := func(r AuditRecord, s int64) int { return cmp.Compare(r.Seq, s) }
	lo, _ := slices.BinarySearchFunc(m.d.audit, f.After+1, bySeq)
	hi := len(m.d.audit)
	if f.Before > 0 {
		hi, _ = slices.BinarySearchFunc(m.d.audit, f.Before, bySeq)
	}
	i, step := lo, 1
	if f.Newest {
		i, step = hi-1, -1
	}
	for ; i >= lo && i < hi; i += step {
		if len(batch) == n {
			return batch, true
		}
		r := m.d.audit[i]
		switch {
		case f.Actor != "" && r.Actor != f.Actor,
			f.NamespaceID != "" && r.NamespaceID != f.NamespaceID,
			f.Action != "" && r.Action != f.Action,
			!f.Since.IsZero() && r.Time.Before(f.Since),
			!f.Until.IsZero() && !r.Time.Before(f.Until):
			continue
		}
		batch = append(batch, cloneAudit(r))
	}
	return batch, false
}

// DigestWithoutAudit is Digest of the state with an empty audit log: equal
// before and after a request means the request changed nothing but (at
// most) the audit log — what a denied write may change.
func (m *Machine) DigestWithoutAudit() string {
	m.mu.RLock()
	d := m.d
	d.audit, d.auditSeq = nil, 0
	b := d.marshal()
	m.mu.RUnlock()
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
