package state

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// The binary snapshot codec (snapcodec.go, snapsections.go,
// snapidentities.go) is written by hand, so a field added to a stored type,
// or a collection added to data, could be left out of it. The test below
// fills every field of every record the state holds, round-trips the state
// through the snapshot and names any field that came back different; it
// also names any part of data the test left empty, so a new collection
// cannot slip past it.

var timeType = reflect.TypeFor[time.Time]()

// filler sets values to distinct non-zero values, so a field the codec
// forgets, or reads into another field, shows.
type filler struct{ n int }

func (f *filler) next() int { f.n++; return f.n }

// fill sets every field under v (settable), recursively.
func (f *filler) fill(v reflect.Value) {
	n := f.next()
	switch {
	case v.Type() == timeType:
		v.Set(reflect.ValueOf(t0.Add(time.Duration(n) * 1001 * time.Microsecond)))
		return
	case v.Type() == reflect.TypeFor[json.RawMessage]():
		v.SetBytes([]byte(`{"n":` + strconv.Itoa(n) + `}`))
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		f.fill(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			f.fill(v.Field(i))
		}
	case reflect.String:
		v.SetString("s" + strconv.Itoa(n))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		f.fill(s.Index(0))
		f.fill(s.Index(1))
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMapWithSize(v.Type(), 2)
		for range 2 {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			f.fill(k)
			f.fill(e)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	default:
		panic(fmt.Sprintf("filler: no value for kind %s (%s): teach the filler", v.Kind(), v.Type()))
	}
}

// filledRecord is a T with every field set.
func filledRecord[T any](f *filler) T {
	var v T
	f.fill(reflect.ValueOf(&v).Elem())
	return v
}

// snapshotData stores two filled records in every collection of data,
// through the same functions Apply and restore use so the derived indexes
// agree. A collection added to data must be stored here (and encoded in
// the snapshot), or requireFilled names it.
func snapshotData(t *testing.T) data {
	f := &filler{}
	d := newData()
	for range 2 {
		ns := filledRecord[Namespace](f)
		d.putNamespace(ns)
		d.putConfiguration(filledRecord[Configuration](f))
		ag := filledRecord[Agent](f)
		d.addAgent(ag)
		for range 2 {
			rv := filledRecord[Revision](f)
			rv.AgentID = ag.ID
			d.addRevision(rv)
		}
		d.putWork(filledRecord[Work](f))
		queued := filledRecord[Work](f)
		queued.State = WorkQueued // indexed as open work
		d.putWork(queued)
		d.started[queued.ID] = filledRecord[time.Time](f) // an open activation's start
		stops := filledRecord[[]PredecessorStop](f)
		d.stops[stops[0].AgentID] = stops
		d.audit = append(d.audit, filledRecord[AuditRecord](f)) // Seq ascending, as the codec requires
		rr := filledRecord[RevisionRuntime](f)
		d.act.revs[rr.RevisionID] = rr
		d.act.policies[filledRecord[string](f)] = filledRecord[RollbackPolicy](f)
		d.act.health[filledRecord[string](f)] = filledRecord[AgentHealth](f)
		d.act.cancels[filledRecord[string](f)] = true
		d.act.rollback[filledRecord[string](f)] = filledRecord[rollbackWork](f)
		d.ids.putUser(filledRecord[User](f))
		d.ids.putSP(filledRecord[ServicePrincipal](f))
		tok := filledRecord[Token](f)
		d.ids.putToken(tok)
		rb := filledRecord[RoleBinding](f)
		d.ids.bindings[rb.ID] = rb
		rs := filledRecord[Restriction](f)
		d.ids.restrictions[rs.ID] = rs
		require.NoError(t, d.idem.load(filledRecord[IdempotencyRecord](f)))
		d.putCredential(filledRecord[CredentialSource](f))
	}
	d.auditSeq = int64(f.next())
	d.installation = filledRecord[Installation](f)
	return d
}

// notFilled are the parts of data that are zero in a full state: the
// idempotency records' eviction head only moves when records expire.
var notFilled = map[string]bool{"data.idem.head": true}

// field returns v's i-th field, readable (and, in an addressable struct,
// settable) even when it is unexported: the test compares data's private
// collections.
func field(v reflect.Value, i int) reflect.Value {
	f := v.Field(i)
	if v.CanAddr() && !f.CanInterface() {
		return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
	}
	return f
}

// requireFilled fails for every value under v that is zero or empty.
func requireFilled(t *testing.T, path string, v reflect.Value) {
	t.Helper()
	if notFilled[path] {
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == timeType {
			require.False(t, v.IsZero(), "%s is zero", path)
			return
		}
		for i := range v.NumField() {
			requireFilled(t, path+"."+v.Type().Field(i).Name, field(v, i))
		}
	case reflect.Pointer:
		require.False(t, v.IsNil(), "%s is nil", path)
		requireFilled(t, path, v.Elem())
	case reflect.Slice, reflect.Map:
		require.NotZero(t, v.Len(), "%s is empty: store filled records in it in snapshotData (and encode it in the snapshot)", path)
		if v.Kind() == reflect.Slice {
			for i := range v.Len() {
				requireFilled(t, fmt.Sprintf("%s[%d]", path, i), v.Index(i))
			}
			return
		}
		for _, k := range v.MapKeys() {
			requireFilled(t, fmt.Sprintf("%s[%v]", path, k), v.MapIndex(k))
		}
	default:
		require.False(t, v.IsZero(), "%s is zero", path)
	}
}

// diffValues appends a line for every value under path where got differs
// from want. Nil and empty slices and maps are alike (the codec encodes
// them alike); times compare with Equal.
func diffValues(path string, want, got reflect.Value, out *[]string) {
	add := func(format string, args ...any) { *out = append(*out, path+": "+fmt.Sprintf(format, args...)) }
	switch want.Kind() {
	case reflect.Struct:
		if want.Type() == timeType {
			w, g := want.Interface().(time.Time), got.Interface().(time.Time)
			if !w.Equal(g) {
				add("got %v, want %v", g, w)
			}
			return
		}
		for i := range want.NumField() {
			diffValues(path+"."+want.Type().Field(i).Name, field(want, i), field(got, i), out)
		}
	case reflect.Pointer:
		if want.IsNil() || got.IsNil() {
			if want.IsNil() != got.IsNil() {
				add("got nil %t, want nil %t", got.IsNil(), want.IsNil())
			}
			return
		}
		diffValues(path, want.Elem(), got.Elem(), out)
	case reflect.Slice:
		if want.Len() != got.Len() {
			add("got %d elements, want %d", got.Len(), want.Len())
			return
		}
		for i := range want.Len() {
			diffValues(fmt.Sprintf("%s[%d]", path, i), want.Index(i), got.Index(i), out)
		}
	case reflect.Map:
		if want.Len() != got.Len() {
			add("got %d entries, want %d", got.Len(), want.Len())
			return
		}
		for _, k := range want.MapKeys() {
			g := got.MapIndex(k)
			if !g.IsValid() {
				add("no entry %v", k)
				continue
			}
			diffValues(fmt.Sprintf("%s[%v]", path, k), want.MapIndex(k), g, out)
		}
	case reflect.String:
		if want.String() != got.String() {
			add("got %q, want %q", got.String(), want.String())
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if want.Int() != got.Int() {
			add("got %d, want %d", got.Int(), want.Int())
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if want.Uint() != got.Uint() {
			add("got %d, want %d", got.Uint(), want.Uint())
		}
	case reflect.Bool:
		if want.Bool() != got.Bool() {
			add("got %t, want %t", got.Bool(), want.Bool())
		}
	default:
		add("cannot compare kind %s: teach diffValues", want.Kind())
	}
}

// TestSnapshotEveryFieldRoundTrips restores a state in which every
// collection holds records with every field set, and requires every field
// of every record, and every index restore rebuilds, to come back as it
// was.
func TestSnapshotEveryFieldRoundTrips(t *testing.T) {
	d := snapshotData(t)
	requireFilled(t, "data", reflect.ValueOf(&d).Elem())
	src := &Machine{d: d, changed: make(chan struct{})}

	snap, err := src.MarshalSnapshot()
	require.NoError(t, err)
	dst := NewMachine()
	require.NoError(t, dst.RestoreSnapshot(snap))
	var diffs []string
	diffValues("data", reflect.ValueOf(&src.d).Elem(), reflect.ValueOf(&dst.d).Elem(), &diffs)
	require.Empty(t, diffs, "fields the snapshot lost (encode them in snapcodec.go, snapsections.go or snapidentities.go):\n%s",
		strings.Join(diffs, "\n"))

	require.Equal(t, src.d.namespaces, dst.d.namespaces)
	require.Equal(t, src.d.configurations, dst.d.configurations)
	require.Equal(t, src.d.agents, dst.d.agents)
	require.Equal(t, src.d.revisions, dst.d.revisions)
	require.Equal(t, src.d.work, dst.d.work)
	require.Equal(t, src.d.stops, dst.d.stops)
	require.Equal(t, src.d.audit, dst.d.audit)
	require.Equal(t, src.d.auditSeq, dst.d.auditSeq)
	require.Equal(t, src.d.installation, dst.d.installation)
	require.Equal(t, src.Digest(), dst.Digest())
	for _, ag := range src.d.agents {
		got, ok := dst.AgentByName(ag.NamespaceID, ag.Name)
		require.True(t, ok)
		require.Equal(t, ag.ID, got.ID)
	}
}

// TestSnapshotFieldTestSeesAForgottenField proves the test above names a
// field the codec drops: a restored state missing one value is reported at
// that field's path.
func TestSnapshotFieldTestSeesAForgottenField(t *testing.T) {
	d := snapshotData(t)
	lost := snapshotData(t)
	for id, a := range lost.agents {
		a.ServicePrincipalID = ""
		lost.agents[id] = a
	}
	for id, r := range lost.act.revs {
		r.Diagnostics = nil
		lost.act.revs[id] = r
	}
	var diffs []string
	diffValues("data", reflect.ValueOf(&d).Elem(), reflect.ValueOf(&lost).Elem(), &diffs)
	require.Len(t, diffs, len(d.agents)+len(d.act.revs))
	joined := strings.Join(diffs, "\n")
	require.Contains(t, joined, "].ServicePrincipalID: got \"\"")
	require.Contains(t, joined, "data.act.revs[")
	require.Contains(t, joined, "].Diagnostics: got 0 entries, want 2")
}
