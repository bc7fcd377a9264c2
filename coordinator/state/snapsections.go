package state

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Snapshot sections: replicated state added after version 2 sits in named
// sections after the version-2 body (snapshot version 3), so each addition
// is its own entry in snapSections and version-2 snapshots still restore.
// The trailer is a uvarint count, then per non-empty section its name and
// its length-prefixed body, in snapSections order. A state whose sections
// are all empty is written as version 2 without a trailer, so its bytes and
// Digest are those of version 2; version 3 requires the trailer, so a
// truncated one never passes for version 2.
type snapSection struct {
	name      string
	empty     func(d *data) bool
	marshal   func(e *snapEnc, d *data)
	unmarshal func(r *snapDec, d *data)
}

var snapSections = []snapSection{
	{name: "activation", empty: func(d *data) bool { return d.act.empty() },
		marshal: marshalActivation, unmarshal: unmarshalActivation},
	{name: "idempotency", empty: func(d *data) bool { return d.idem.len() == 0 },
		marshal: marshalIdempotency, unmarshal: unmarshalIdempotency},
	{name: "credentials", empty: func(d *data) bool { return len(d.creds) == 0 },
		marshal: marshalCredentials, unmarshal: unmarshalCredentials},
	{name: "resources", empty: resourcesEmpty, marshal: marshalResources, unmarshal: unmarshalResources},
	{name: "workstarts", empty: func(d *data) bool { return len(d.started) == 0 },
		marshal: marshalWorkStarts, unmarshal: unmarshalWorkStarts},
}

// snapVersion is the version marshal writes.
func (d *data) snapVersion() uint64 {
	for _, s := range snapSections {
		if !s.empty(d) {
			return snapshotVersionSections
		}
	}
	return snapshotVersion
}

// marshalSections appends the trailer of non-empty sections.
func (d *data) marshalSections(e *snapEnc) {
	var used []snapSection
	for _, s := range snapSections {
		if !s.empty(d) {
			used = append(used, s)
		}
	}
	if len(used) == 0 {
		return
	}
	e.uint(uint64(len(used)))
	for _, s := range used {
		e.str(s.name)
		body := &snapEnc{}
		s.marshal(body, d)
		e.bytes(body.b)
	}
}

// sections reads the trailer of a version-3 snapshot.
func (r *snapDec) sections(d *data) {
	n := r.count()
	if r.err == nil && n == 0 {
		r.fail(errors.New("version 3 without sections"))
	}
	seen := map[string]bool{}
	for range n {
		name := r.str()
		body := r.raw()
		if r.err != nil {
			return
		}
		i := slices.IndexFunc(snapSections, func(s snapSection) bool { return s.name == name })
		if i < 0 || seen[name] {
			r.fail(fmt.Errorf("unknown or repeated section %q", name))
			return
		}
		seen[name] = true
		sub := &snapDec{b: body, syms: r.syms}
		snapSections[i].unmarshal(sub, d)
		if sub.err == nil && len(sub.b) != 0 {
			sub.fail(fmt.Errorf("section %q: %d bytes of trailing data", name, len(sub.b)))
		}
		if sub.err != nil {
			r.fail(fmt.Errorf("section %q: %w", name, sub.err))
			return
		}
	}
}

func (e *snapEnc) dur(v time.Duration) { e.int(int64(v)) }

func (e *snapEnc) strMap(m map[string]string) {
	e.uint(uint64(len(m)))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		e.str(k)
		e.str(m[k])
	}
}

func (r *snapDec) strMap() map[string]string {
	n := r.count()
	if n == 0 {
		return nil
	}
	m := make(map[string]string, n)
	for range n {
		k := r.sym()
		m[k] = r.str()
	}
	return m
}

func marshalActivation(e *snapEnc, d *data) {
	a := &d.act
	encodeSorted(e, a.revs, func(v RevisionRuntime) {
		e.str(v.RevisionID)
		e.str(v.Phase)
		e.str(v.Reason)
		e.str(v.HeldCode)
		e.str(v.CauseKind)
		e.str(v.CauseDetail)
		e.time(v.ObservedAt)
		e.str(v.Credential)
		e.strMap(v.Diagnostics)
		e.str(v.PreviousRevisionID)
		e.time(v.ActivatedAt)
		e.bool(v.Unfinalized)
		e.bool(v.Rollback)
		e.str(v.RollbackCause)
		e.bool(v.RolledBack)
	})
	e.uint(uint64(len(a.policies)))
	for _, k := range slices.Sorted(maps.Keys(a.policies)) {
		e.str(k)
		e.bool(a.policies[k].Enabled)
		e.dur(a.policies[k].Window)
	}
	e.uint(uint64(len(a.health)))
	for _, k := range slices.Sorted(maps.Keys(a.health)) {
		h := a.health[k]
		e.str(k)
		e.str(h.RevisionID)
		e.bool(h.Ready)
		e.str(h.Reason)
		e.str(h.HeldCode)
		e.str(h.CauseKind)
		e.str(h.CauseDetail)
		e.time(h.ObservedAt)
		e.time(h.Since)
		e.bool(h.EverReady)
	}
	e.strs(slices.Sorted(maps.Keys(a.cancels)))
	e.uint(uint64(len(a.rollback)))
	for _, k := range slices.Sorted(maps.Keys(a.rollback)) {
		e.str(k)
		e.str(a.rollback[k].From)
		e.str(a.rollback[k].Cause)
	}
}

func unmarshalActivation(r *snapDec, d *data) {
	a := newActivation()
	for range r.count() {
		v := RevisionRuntime{RevisionID: r.str(), Phase: r.sym(), Reason: r.sym(), HeldCode: r.sym(), CauseKind: r.sym(),
			CauseDetail: r.str(), ObservedAt: r.time(), Credential: r.sym(), Diagnostics: r.strMap(),
			PreviousRevisionID: r.str(), ActivatedAt: r.time(), Unfinalized: r.bool(), Rollback: r.bool(),
			RollbackCause: r.str(), RolledBack: r.bool()}
		a.revs[v.RevisionID] = v
	}
	for range r.count() {
		k := r.str()
		a.policies[k] = RollbackPolicy{Enabled: r.bool(), Window: time.Duration(r.int())}
	}
	for range r.count() {
		k := r.str()
		a.health[k] = AgentHealth{RevisionID: r.str(), Ready: r.bool(), Reason: r.sym(), HeldCode: r.sym(),
			CauseKind: r.sym(), CauseDetail: r.str(), ObservedAt: r.time(), Since: r.time(), EverReady: r.bool()}
	}
	for _, id := range r.strs() {
		a.cancels[id] = true
	}
	for range r.count() {
		k := r.str()
		a.rollback[k] = rollbackWork{From: r.str(), Cause: r.str()}
	}
	d.act = a
}

// marshalIdempotency writes the idempotency records oldest first (their
// order decides eviction, so it is part of the state).
func marshalIdempotency(e *snapEnc, d *data) {
	recs := d.idem.records()
	e.uint(uint64(len(recs)))
	for _, r := range recs {
		e.str(r.Actor)
		e.str(r.Key)
		e.str(r.Hash)
		e.int(int64(r.Status))
		e.str(r.Type)
		e.bytes(r.Result)
		e.time(r.CreatedAt)
		e.time(r.ExpiresAt)
	}
}

func unmarshalIdempotency(r *snapDec, d *data) {
	for range r.count() {
		rec := IdempotencyRecord{Actor: r.sym(), Key: r.str(), Hash: r.str(), Status: r.intN(), Type: r.sym(),
			Result: r.bytes(), CreatedAt: r.time(), ExpiresAt: r.time()}
		if r.err != nil {
			return
		}
		if err := d.idem.load(rec); err != nil {
			r.fail(err)
			return
		}
	}
}
