package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// The version-2 snapshot body: snapMagic, a uvarint version, then every
// collection as a uvarint count followed by its records in canonical order
// (Namespaces, Configurations, Agents, work by ID; revisions grouped by Agent
// ID in Number order; predecessor-stop lists by Agent ID; audit by Seq).
// Strings and byte strings are uvarint-length-prefixed; integers are
// (zigzag) varints; times are UTC Unix seconds (varint) and nanoseconds
// (uvarint); optional values carry a 0/1 presence byte. Nil and empty
// slices or maps encode alike (as JSON's omitempty did), so replicas that
// differ only there still agree on the Digest. The encoding is written by
// hand in step with the stored types: TestSnapshotEveryFieldRoundTrips
// (snapfields_test.go) names any field or collection a change leaves out.
const snapMagic = "\x00OCESTATE"

// snapEnc appends the encoding to b.
type snapEnc struct{ b []byte }

func (e *snapEnc) uint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *snapEnc) int(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *snapEnc) str(s string)  { e.uint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *snapEnc) bytes(p []byte) {
	e.uint(uint64(len(p)))
	e.b = append(e.b, p...)
}

func (e *snapEnc) bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

func (e *snapEnc) time(t time.Time) {
	e.int(t.Unix())
	e.uint(uint64(t.Nanosecond()))
}

func (e *snapEnc) strs(s []string) {
	e.uint(uint64(len(s)))
	for _, v := range s {
		e.str(v)
	}
}

func (e *snapEnc) auth(h *HarnessAuth) {
	e.bool(h != nil)
	if h != nil {
		e.str(h.Method)
		e.str(h.CredentialKind)
		e.str(h.SourceRef)
	}
}

func (e *snapEnc) namespace(v Namespace) {
	e.str(v.ID)
	e.str(v.Name)
	e.time(v.CreatedAt)
}

func (e *snapEnc) configuration(v Configuration) {
	e.str(v.ID)
	e.str(v.NamespaceID)
	e.str(v.Name)
	e.int(v.Generation)
	e.bytes(v.Document)
	e.time(v.CreatedAt)
	e.time(v.UpdatedAt)
}

func (e *snapEnc) agent(v Agent) {
	e.str(v.ID)
	e.str(v.NamespaceID)
	e.str(v.Name)
	e.str(v.ExecutionMode)
	e.str(v.ConfigurationID)
	e.auth(v.HarnessAuth)
	e.str(v.ComputeID)
	e.strs(v.Plugins)
	e.str(v.ActiveRevisionID)
	e.int(v.RevisionCount)
	e.bool(v.Deleting)
	e.time(v.CreatedAt)
	e.time(v.UpdatedAt)
}

func (e *snapEnc) revision(v Revision) {
	e.str(v.ID)
	e.str(v.AgentID)
	e.str(v.NamespaceID)
	e.int(v.Number)
	e.bytes(v.Document)
	e.str(v.ConfigurationID)
	e.int(v.ConfigurationGeneration)
	e.str(v.Harness.ID)
	e.str(v.Harness.Version)
	e.str(v.Mode)
	e.str(v.ComputeID)
	e.auth(v.HarnessAuth)
	e.strs(v.Plugins)
	e.str(v.Status)
	e.str(v.FailureCode)
	e.str(v.FailureDetail)
	e.time(v.CreatedAt)
}

func (e *snapEnc) work(v Work) {
	e.str(v.ID)
	e.str(v.Kind)
	e.str(v.NamespaceID)
	e.str(v.AgentID)
	e.str(v.RevisionID)
	e.str(v.State)
	e.str(v.Phase)
	e.int(int64(v.Attempts))
	e.int(int64(v.MaxAttempts))
	e.time(v.AvailableAt)
	e.str(v.Owner)
	e.time(v.LeaseExpiry)
	e.str(v.LastCode)
	e.str(v.LastDetail)
	e.str(v.Actor)
	e.time(v.CreatedAt)
	e.time(v.UpdatedAt)
}

func (e *snapEnc) stop(v PredecessorStop) {
	e.str(v.AgentID)
	e.str(v.RevisionID)
	e.time(v.StoppedAt)
	e.int(int64(v.Restops))
	e.time(v.NextCheckAt)
}

func (e *snapEnc) audit(v AuditRecord) {
	e.int(v.Seq)
	e.time(v.Time)
	e.str(v.Action)
	e.str(v.Actor)
	e.str(v.NamespaceID)
	e.str(v.AgentID)
	e.str(v.RevisionID)
	// Audit details hold a few keys: sort them without allocating.
	var buf [8]string
	keys := buf[:0]
	for k := range v.Details {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	e.uint(uint64(len(keys)))
	for _, k := range keys {
		e.str(k)
		e.str(v.Details[k])
	}
}

func (e *snapEnc) installation(v Installation) {
	e.str(v.NativeWorkerSupport)
	e.str(v.SandboxDriver)
	e.str(v.CredentialGateway)
}

// encodeSorted writes a map's values in key order.
func encodeSorted[T any](e *snapEnc, m map[string]T, put func(T)) {
	e.uint(uint64(len(m)))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		put(m[k])
	}
}

// marshal renders the canonical version-2 bytes; the caller holds the lock.
func (d *data) marshal() []byte {
	size := 64
	for _, r := range d.revisions {
		size += len(r.Document) + 256
	}
	size += 256*len(d.work) + 192*len(d.agents) + 192*len(d.audit)
	e := &snapEnc{b: make([]byte, 0, size)}
	e.b = append(e.b, snapMagic...)
	e.uint(d.snapVersion())
	encodeSorted(e, d.namespaces, e.namespace)
	encodeSorted(e, d.configurations, e.configuration)
	encodeSorted(e, d.agents, e.agent)
	// agentRevs lists every revision exactly once (Apply adds and deletes
	// them together), already in Number order.
	n := 0
	for _, ids := range d.agentRevs {
		n += len(ids)
	}
	e.uint(uint64(n))
	for _, agentID := range slices.Sorted(maps.Keys(d.agentRevs)) {
		for _, id := range d.agentRevs[agentID] {
			e.revision(d.revisions[id])
		}
	}
	encodeSorted(e, d.work, e.work)
	encodeSorted(e, d.stops, func(list []PredecessorStop) {
		e.uint(uint64(len(list)))
		for _, s := range list {
			e.stop(s)
		}
	})
	e.uint(uint64(len(d.audit)))
	for _, a := range d.audit {
		e.audit(a)
	}
	e.int(d.auditSeq)
	e.installation(d.installation)
	d.marshalSections(e)
	return e.b
}

// snapDec reads the encoding; the first error sticks and every later read
// returns a zero value.
type snapDec struct {
	b    []byte
	err  error
	syms map[string]string // interned low-cardinality values
}

var errTruncated = errors.New("truncated")

func (r *snapDec) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *snapDec) uint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(errTruncated)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *snapDec) int() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(errTruncated)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// intN reads an int that must fit in an int32 (attempt counters).
func (r *snapDec) intN() int {
	v := r.int()
	if v != int64(int32(v)) {
		r.fail(fmt.Errorf("integer %d out of range", v))
		return 0
	}
	return int(v)
}

// count reads a collection length; each element takes at least one byte, so
// a count beyond the remaining input is corrupt (and never allocated).
func (r *snapDec) count() int {
	n := r.uint()
	if n > uint64(len(r.b)) {
		r.fail(fmt.Errorf("count %d exceeds the remaining %d bytes", n, len(r.b)))
		return 0
	}
	return int(n)
}

func (r *snapDec) raw() []byte {
	n := r.uint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail(errTruncated)
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *snapDec) str() string { return string(r.raw()) }

// sym reads a string drawn from a small set (kinds, states, codes, the IDs
// of Namespaces and Configurations shared by many records) and shares one
// copy of each: fewer allocations on restore and less memory afterwards.
func (r *snapDec) sym() string {
	p := r.raw()
	if s, ok := r.syms[string(p)]; ok {
		return s
	}
	s := string(p)
	if len(r.syms) < maxSyms {
		r.syms[s] = s
	}
	return s
}

// maxSyms bounds the intern table against inputs of unique values.
const maxSyms = 1 << 16

func (r *snapDec) bytes() []byte {
	p := r.raw()
	if len(p) == 0 {
		return nil
	}
	return append([]byte(nil), p...)
}

func (r *snapDec) bool() bool {
	if r.err != nil {
		return false
	}
	if len(r.b) == 0 {
		r.fail(errTruncated)
		return false
	}
	v := r.b[0]
	r.b = r.b[1:]
	if v > 1 {
		r.fail(fmt.Errorf("bad boolean %d", v))
	}
	return v == 1
}

func (r *snapDec) time() time.Time {
	s := r.int()
	ns := r.uint()
	if ns >= uint64(time.Second) {
		r.fail(fmt.Errorf("bad nanoseconds %d", ns))
		return time.Time{}
	}
	return time.Unix(s, int64(ns)).UTC()
}

func (r *snapDec) strs() []string {
	n := r.count()
	if n == 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = r.str()
	}
	return out
}

func (r *snapDec) auth() *HarnessAuth {
	if !r.bool() {
		return nil
	}
	return &HarnessAuth{Method: r.sym(), CredentialKind: r.sym(), SourceRef: r.sym()}
}

func (r *snapDec) namespace() Namespace {
	return Namespace{ID: r.str(), Name: r.str(), CreatedAt: r.time()}
}

func (r *snapDec) configuration() Configuration {
	return Configuration{ID: r.str(), NamespaceID: r.sym(), Name: r.str(), Generation: r.int(),
		Document: r.bytes(), CreatedAt: r.time(), UpdatedAt: r.time()}
}

func (r *snapDec) agent() Agent {
	return Agent{ID: r.str(), NamespaceID: r.sym(), Name: r.str(), ExecutionMode: r.sym(),
		ConfigurationID: r.sym(), HarnessAuth: r.auth(), ComputeID: r.sym(), Plugins: r.strs(),
		ActiveRevisionID: r.str(), RevisionCount: r.int(), Deleting: r.bool(), CreatedAt: r.time(),
		UpdatedAt: r.time()}
}

func (r *snapDec) revision() Revision {
	return Revision{ID: r.str(), AgentID: r.str(), NamespaceID: r.sym(), Number: r.int(), Document: r.bytes(),
		ConfigurationID: r.sym(), ConfigurationGeneration: r.int(),
		Harness: HarnessIdentity{ID: r.sym(), Version: r.sym()}, Mode: r.sym(), ComputeID: r.sym(),
		HarnessAuth: r.auth(), Plugins: r.strs(), Status: r.sym(), FailureCode: r.sym(),
		FailureDetail: r.str(), CreatedAt: r.time()}
}

func (r *snapDec) work() Work {
	return Work{ID: r.str(), Kind: r.sym(), NamespaceID: r.sym(), AgentID: r.str(), RevisionID: r.str(),
		State: r.sym(), Phase: r.sym(), Attempts: r.intN(), MaxAttempts: r.intN(), AvailableAt: r.time(),
		Owner: r.sym(), LeaseExpiry: r.time(), LastCode: r.sym(), LastDetail: r.str(), Actor: r.sym(),
		CreatedAt: r.time(), UpdatedAt: r.time()}
}

func (r *snapDec) stop() PredecessorStop {
	return PredecessorStop{AgentID: r.str(), RevisionID: r.str(), StoppedAt: r.time(), Restops: r.intN(),
		NextCheckAt: r.time()}
}

func (r *snapDec) audit() AuditRecord {
	a := AuditRecord{Seq: r.int(), Time: r.time(), Action: r.sym(), Actor: r.sym(), NamespaceID: r.sym(),
		AgentID: r.str(), RevisionID: r.str()}
	if n := r.count(); n > 0 {
		a.Details = make(map[string]string, n)
		for range n {
			k := r.sym()
			a.Details[k] = r.str()
		}
	}
	return a
}

func (r *snapDec) installation() Installation {
	return Installation{NativeWorkerSupport: r.str(), SandboxDriver: r.str(), CredentialGateway: r.str()}
}

// decodeEach reads a counted collection, sizing its maps with presize
// first, then loading each record; it stops at the first decode or load
// error.
func decodeEach[T any](r *snapDec, presize func(n int), read func() T, load func(T) error) {
	n := r.count()
	if presize != nil && n > 0 {
		presize(n)
	}
	for range n {
		v := read()
		if r.err != nil {
			return
		}
		if err := load(v); err != nil {
			r.fail(err)
			return
		}
	}
}

// unmarshalBinary decodes a version-2 body into fresh data with its indexes.
func unmarshalBinary(b []byte) (data, error) {
	r := &snapDec{b: b[len(snapMagic):], syms: map[string]string{}}
	v := r.uint()
	if r.err == nil && v != snapshotVersion && v != snapshotVersionSections {
		return data{}, fmt.Errorf("%w: snapshot version %d", ErrInvalid, v)
	}
	d := newData()
	decodeEach(r, nil, r.namespace, d.loadNamespace)
	decodeEach(r, nil, r.configuration, d.loadConfiguration)
	decodeEach(r, func(n int) {
		d.agents = make(map[string]Agent, n)
		d.agentByName = make(map[nameKey]string, n)
		d.agentRevs = make(map[string][]string, n)
	}, r.agent, d.loadAgent)
	decodeEach(r, func(n int) { d.revisions = make(map[string]Revision, n) }, r.revision, d.loadRevision)
	decodeEach(r, func(n int) { d.work = make(map[string]Work, n) }, r.work, d.loadWork)
	decodeEach(r, nil, func() []PredecessorStop {
		n := r.count()
		list := make([]PredecessorStop, 0, n)
		for range n {
			list = append(list, r.stop())
		}
		return list
	}, d.loadStops)
	if n := r.count(); n > 0 {
		d.audit = make([]AuditRecord, 0, n)
		for range n {
			d.audit = append(d.audit, r.audit())
		}
	}
	d.auditSeq = r.int()
	d.installation = r.installation()
	if v == snapshotVersionSections {
		r.sections(&d)
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail(fmt.Errorf("%d bytes of trailing data", len(r.b)))
	}
	if r.err != nil {
		return data{}, fmt.Errorf("%w: snapshot: %w", ErrInvalid, r.err)
	}
	return d, nil
}
