package state

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCredentialSources: create, rotate (a compare-and-set on the version)
// and withdraw keep metadata only, each audited with its actor and the
// source's exact resource; refused commands change nothing; a Namespace
// holding sources cannot be deleted; names are unique per Namespace only.
func TestCredentialSources(t *testing.T) {
	f := newFx(t)
	created := f.must(CmdCreateCredentialSource, CreateCredentialSource{ID: "k1", NamespaceID: "ns1", Name: "model",
		Keys: []string{"value"}}).(CredentialSource)
	require.Equal(t, CredentialSource{ID: "k1", NamespaceID: "ns1", Name: "model", Keys: []string{"value"}, Version: 1,
		CreatedAt: t0, CreatedBy: "alice"}, created)
	// The same name in another Namespace is another source.
	f.must(CmdCreateCredentialSource, CreateCredentialSource{ID: "k2", NamespaceID: "ns2", Name: "model",
		Keys: []string{"a", "b"}, RegisteredFrom: "secret:oce-system/model-keys"})

	before := f.m.Digest()
	for name, p := range map[string]any{
		"taken name":      CreateCredentialSource{ID: "k3", NamespaceID: "ns1", Name: "model", Keys: []string{"value"}},
		"taken id":        CreateCredentialSource{ID: "k1", NamespaceID: "ns1", Name: "other", Keys: []string{"value"}},
		"no namespace":    CreateCredentialSource{ID: "k3", NamespaceID: "nsX", Name: "x", Keys: []string{"value"}},
		"bad name":        CreateCredentialSource{ID: "k3", NamespaceID: "ns1", Name: "Model", Keys: []string{"value"}},
		"no keys":         CreateCredentialSource{ID: "k3", NamespaceID: "ns1", Name: "x"},
		"unsorted keys":   CreateCredentialSource{ID: "k3", NamespaceID: "ns1", Name: "x", Keys: []string{"b", "a"}},
		"repeated keys":   CreateCredentialSource{ID: "k3", NamespaceID: "ns1", Name: "x", Keys: []string{"a", "a"}},
		"bad key":         CreateCredentialSource{ID: "k3", NamespaceID: "ns1", Name: "x", Keys: []string{"../a"}},
		"too many keys":   CreateCredentialSource{ID: "k3", NamespaceID: "ns1", Name: "x", Keys: []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}},
		"bad location":    CreateCredentialSource{ID: "k3", NamespaceID: "ns1", Name: "x", Keys: []string{"a"}, RegisteredFrom: "a b"},
		"stale rotation":  RotateCredentialSource{ID: "k1", Version: 1, Keys: []string{"value"}},
		"skipped version": RotateCredentialSource{ID: "k1", Version: 3, Keys: []string{"value"}},
		"rotate unknown":  RotateCredentialSource{ID: "kX", Version: 2, Keys: []string{"value"}},
		"withdraw gone":   WithdrawCredentialSource{ID: "kX"},
		"delete ns1":      DeleteNamespace{ID: "ns1"},
	} {
		var cmd Named
		switch p.(type) {
		case CreateCredentialSource:
			cmd = CmdCreateCredentialSource
		case RotateCredentialSource:
			cmd = CmdRotateCredentialSource
		case WithdrawCredentialSource:
			cmd = CmdWithdrawCredentialSource
		case DeleteNamespace:
			cmd = CmdDeleteNamespace
		}
		_, err := f.apply(cmd, p)
		require.Error(t, err, name)
		require.Equal(t, before, f.m.Digest(), "%s changed the state", name)
	}

	gen := f.m.IdentityGeneration()
	f.now = t0.Add(time.Minute)
	rotated := f.must(CmdRotateCredentialSource, RotateCredentialSource{ID: "k1", Version: 2, Keys: []string{"a", "value"}}).(CredentialSource)
	require.Equal(t, int64(2), rotated.Version)
	require.Equal(t, []string{"a", "value"}, rotated.Keys)
	require.Equal(t, f.now, rotated.RotatedAt)
	require.Equal(t, t0, rotated.CreatedAt)
	require.Greater(t, f.m.IdentityGeneration(), gen, "the deploy decisions read credential sources")

	got, ok := f.m.CredentialSourceByName("ns1", "model")
	require.True(t, ok)
	require.Equal(t, rotated, got)
	got.Keys[0] = "changed"
	again, _ := f.m.CredentialSource("k1")
	require.Equal(t, "a", again.Keys[0], "reads are copies")
	require.Len(t, f.m.CredentialSources("ns2"), 1)
	require.Len(t, f.m.CredentialSources(""), 2)

	f.must(CmdWithdrawCredentialSource, WithdrawCredentialSource{ID: "k1"})
	_, ok = f.m.CredentialSourceByName("ns1", "model")
	require.False(t, ok)
	var actions []string
	for _, r := range f.m.Audit(0, 0) {
		if r.Resource == `CredentialSource::"one/model"` || r.Resource == `CredentialSource::"two/model"` {
			actions = append(actions, r.Action+" "+r.Details["version"]+" "+r.Details["keys"]+" "+r.Actor)
		}
	}
	require.Equal(t, []string{"oce.credentials.create 1 value alice", "oce.credentials.register 1 a,b alice",
		"oce.credentials.rotate 2 a,value alice", "oce.credentials.withdraw 2 a,value alice"}, actions)

	// Without sources (and everything else) the Namespace may go.
	f.must(CmdWithdrawCredentialSource, WithdrawCredentialSource{ID: "k2"})
	f.must(CmdDeleteConfiguration, DeleteConfiguration{ID: "c2"})
	f.must(CmdDeleteNamespace, DeleteNamespace{ID: "ns2"})
}

// TestCredentialSourcesSurviveASnapshot: the metadata round-trips with its
// name index in a section of its own, written only when a source exists.
func TestCredentialSourcesSurviveASnapshot(t *testing.T) {
	f := newFx(t)
	empty, err := f.m.MarshalSnapshot()
	require.NoError(t, err)
	require.Zero(t, bytes.Count(empty, []byte("credentials")))
	f.must(CmdCreateCredentialSource, CreateCredentialSource{ID: "k1", NamespaceID: "ns1", Name: "model", Keys: []string{"value"}})
	snap, err := f.m.MarshalSnapshot()
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(snap, append([]byte(snapMagic), binary.AppendUvarint(nil, snapshotVersionSections)...)))
	require.Equal(t, 1, bytes.Count(snap, []byte("\x0bcredentials")), "the section, named once")
	m := NewMachine()
	require.NoError(t, m.RestoreSnapshot(snap))
	require.Equal(t, f.m.Digest(), m.Digest())
	got, ok := m.CredentialSourceByName("ns1", "model")
	require.True(t, ok)
	require.Equal(t, int64(1), got.Version)
}
