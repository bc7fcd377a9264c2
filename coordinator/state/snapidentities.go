package state

import (
	"fmt"
	"maps"
	"slices"
)

// The "identities" snapshot section (snapsections.go): users, service
// principals, tokens, role bindings and Restrictions, each by ID; then the
// identity facts of the version-2 body's records, by their IDs — each
// Agent's and revision's ServicePrincipal, the issuer groups of a work's
// actor, and an audit record's resource and outcome — so the body keeps its
// version-2 encoding.

func init() {
	snapSections = append(snapSections, snapSection{name: "identities", empty: identitiesEmpty,
		marshal: marshalIdentities, unmarshal: unmarshalIdentities},
		// After identities: it labels role bindings (labels.go).
		snapSection{name: "labels", empty: labelsEmpty, marshal: marshalLabels, unmarshal: unmarshalLabels})
}

func identitiesEmpty(d *data) bool {
	x := d.ids
	if len(x.users)+len(x.sps)+len(x.tokens)+len(x.bindings)+len(x.restrictions) > 0 {
		return false
	}
	for _, a := range d.agents {
		if a.ServicePrincipalID != "" {
			return false
		}
	}
	for _, w := range d.work {
		if len(w.ActorGroups) > 0 {
			return false
		}
	}
	for _, r := range d.audit {
		if r.Resource != "" || r.Outcome != "" {
			return false
		}
	}
	for _, r := range d.revisions {
		if r.ServicePrincipalID != "" {
			return false
		}
	}
	return true
}

func marshalIdentities(e *snapEnc, d *data) {
	x := d.ids
	encodeSorted(e, x.users, func(u User) {
		e.str(u.ID)
		e.str(u.Name)
		e.strs(u.Groups)
		e.time(u.CreatedAt)
	})
	encodeSorted(e, x.sps, func(sp ServicePrincipal) {
		e.str(sp.ID)
		e.str(sp.NamespaceID)
		e.str(sp.Name)
		e.str(sp.AgentID)
		e.time(sp.CreatedAt)
	})
	encodeSorted(e, x.tokens, func(t Token) {
		e.str(t.ID)
		e.str(t.Name)
		e.str(t.PrincipalKind)
		e.str(t.PrincipalID)
		e.str(t.Hash)
		e.time(t.CreatedAt)
		e.time(t.ExpiresAt)
		e.bool(!t.RevokedAt.IsZero())
		if !t.RevokedAt.IsZero() {
			e.time(t.RevokedAt)
		}
		e.str(t.CreatedBy)
	})
	encodeSorted(e, x.bindings, func(b RoleBinding) {
		e.str(b.ID)
		e.str(b.Role)
		e.str(b.NamespaceID)
		e.str(b.SubjectKind)
		e.str(b.Subject)
		e.time(b.CreatedAt)
		e.str(b.CreatedBy)
	})
	encodeSorted(e, x.restrictions, func(r Restriction) {
		e.str(r.ID)
		e.str(r.Name)
		e.str(r.Policy)
		e.time(r.CreatedAt)
		e.time(r.UpdatedAt)
		e.str(r.CreatedBy)
	})
	// Facts of the body's records, keyed by their IDs (Seq for audit).
	pairs := func(ids []string, val func(id string) string) {
		var keep []string
		for _, id := range ids {
			if val(id) != "" {
				keep = append(keep, id)
			}
		}
		e.uint(uint64(len(keep)))
		for _, id := range keep {
			e.str(id)
			e.str(val(id))
		}
	}
	pairs(slices.Sorted(maps.Keys(d.agents)), func(id string) string { return d.agents[id].ServicePrincipalID })
	pairs(slices.Sorted(maps.Keys(d.revisions)), func(id string) string { return d.revisions[id].ServicePrincipalID })
	var groups []string
	for _, id := range slices.Sorted(maps.Keys(d.work)) {
		if len(d.work[id].ActorGroups) > 0 {
			groups = append(groups, id)
		}
	}
	e.uint(uint64(len(groups)))
	for _, id := range groups {
		e.str(id)
		e.strs(d.work[id].ActorGroups)
	}
	n := 0
	for _, r := range d.audit {
		if r.Resource != "" || r.Outcome != "" {
			n++
		}
	}
	e.uint(uint64(n))
	for _, r := range d.audit {
		if r.Resource != "" || r.Outcome != "" {
			e.int(r.Seq)
			e.str(r.Resource)
			e.str(r.Outcome)
		}
	}
}

func unmarshalIdentities(r *snapDec, d *data) {
	x := &d.ids
	decodeEach(r, nil, func() User {
		return User{ID: r.str(), Name: r.str(), Groups: r.strs(), CreatedAt: r.time()}
	}, func(u User) error {
		if _, ok := x.users[u.ID]; ok {
			return errDuplicate("user", u.ID)
		}
		if _, ok := x.userByName[u.Name]; ok {
			return errDuplicate("user name", u.Name)
		}
		x.putUser(u)
		return nil
	})
	decodeEach(r, nil, func() ServicePrincipal {
		return ServicePrincipal{ID: r.str(), NamespaceID: r.sym(), Name: r.str(), AgentID: r.str(), CreatedAt: r.time()}
	}, func(sp ServicePrincipal) error {
		if _, ok := x.sps[sp.ID]; ok {
			return errDuplicate("service principal", sp.ID)
		}
		if _, ok := x.spByName[nameKey{sp.NamespaceID, sp.Name}]; ok {
			return errDuplicate("service principal name", sp.Name)
		}
		x.putSP(sp)
		return nil
	})
	decodeEach(r, nil, func() Token {
		t := Token{ID: r.str(), Name: r.str(), PrincipalKind: r.sym(), PrincipalID: r.str(), Hash: r.str(),
			CreatedAt: r.time(), ExpiresAt: r.time()}
		if r.bool() {
			t.RevokedAt = r.time()
		}
		t.CreatedBy = r.sym()
		return t
	}, func(t Token) error {
		if _, ok := x.tokens[t.ID]; ok {
			return errDuplicate("token", t.ID)
		}
		x.putToken(t)
		return nil
	})
	decodeEach(r, nil, func() RoleBinding {
		return RoleBinding{ID: r.str(), Role: r.sym(), NamespaceID: r.sym(), SubjectKind: r.sym(), Subject: r.str(),
			CreatedAt: r.time(), CreatedBy: r.sym()}
	}, func(b RoleBinding) error {
		if _, ok := x.bindings[b.ID]; ok {
			return errDuplicate("role binding", b.ID)
		}
		x.bindings[b.ID] = b
		return nil
	})
	decodeEach(r, nil, func() Restriction {
		return Restriction{ID: r.str(), Name: r.str(), Policy: r.str(), CreatedAt: r.time(), UpdatedAt: r.time(),
			CreatedBy: r.sym()}
	}, func(v Restriction) error {
		if _, ok := x.restrictions[v.ID]; ok {
			return errDuplicate("restriction", v.ID)
		}
		x.restrictions[v.ID] = v
		return nil
	})
	type pair struct{ id, val string }
	readPair := func() pair { return pair{r.str(), r.sym()} }
	decodeEach(r, nil, readPair, func(p pair) error {
		a, ok := d.agents[p.id]
		if !ok {
			return fmt.Errorf("%w: identities name a missing agent %q", ErrInvalid, p.id)
		}
		a.ServicePrincipalID = p.val
		d.agents[p.id] = a
		return nil
	})
	decodeEach(r, nil, readPair, func(p pair) error {
		rev, ok := d.revisions[p.id]
		if !ok {
			return fmt.Errorf("%w: identities name a missing revision %q", ErrInvalid, p.id)
		}
		rev.ServicePrincipalID = p.val
		d.revisions[p.id] = rev
		return nil
	})
	type groups struct {
		id string
		gs []string
	}
	decodeEach(r, nil, func() groups { return groups{r.str(), r.strs()} }, func(g groups) error {
		w, ok := d.work[g.id]
		if !ok {
			return fmt.Errorf("%w: identities name missing work %q", ErrInvalid, g.id)
		}
		w.ActorGroups = g.gs
		d.work[g.id] = w
		return nil
	})
	type extra struct {
		seq               int64
		resource, outcome string
	}
	i := 0
	decodeEach(r, nil, func() extra { return extra{r.int(), r.str(), r.sym()} }, func(x extra) error {
		// Records are in Seq order, and so are their extras.
		for i < len(d.audit) && d.audit[i].Seq < x.seq {
			i++
		}
		if i == len(d.audit) || d.audit[i].Seq != x.seq {
			return fmt.Errorf("%w: identities name a missing audit record %d", ErrInvalid, x.seq)
		}
		d.audit[i].Resource, d.audit[i].Outcome = x.resource, x.outcome
		return nil
	})
}
