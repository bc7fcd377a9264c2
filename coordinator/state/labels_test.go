package state

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValidateLabels(t *testing.T) {
	many := map[string]string{}
	for i := range MaxLabels + 1 {
		many[strings.Repeat("k", i+1)] = "v"
	}
	for name, tc := range map[string]struct {
		labels map[string]string
		ok     bool
	}{
		"none":               {nil, true},
		"plain":              {map[string]string{"team": "a", "app.kubernetes.io/name": "bot-1", "x": ""}, true},
		"63-character name":  {map[string]string{strings.Repeat("a", 63): "v"}, true},
		"64-character name":  {map[string]string{strings.Repeat("a", 64): "v"}, false},
		"64-character value": {map[string]string{"k": strings.Repeat("a", 64)}, false},
		"leading dash":       {map[string]string{"-k": "v"}, false},
		"trailing dot value": {map[string]string{"k": "v."}, false},
		"space in value":     {map[string]string{"k": "a b"}, false},
		"empty key":          {map[string]string{"": "v"}, false},
		"empty prefix":       {map[string]string{"/k": "v"}, false},
		"upper-case prefix":  {map[string]string{"Example.com/k": "v"}, false},
		"two slashes":        {map[string]string{"a/b/c": "v"}, false},
		"too many":           {many, false},
		"exactly the bound":  {func() map[string]string { m := map[string]string{}; fillLabels(m, MaxLabels); return m }(), true},
	} {
		t.Run(name, func(t *testing.T) {
			err := ValidateLabels(tc.labels)
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrLabels)
		})
	}
}

// fillLabels fills m with n distinct labels.
func fillLabels(m map[string]string, n int) {
	for i := range n {
		m["k"+strings.Repeat("x", i)] = "v"
	}
}

func TestSelector(t *testing.T) {
	labels := map[string]string{"team": "a", "env": "prod"}
	for _, tc := range []struct {
		sel   string
		match bool
		bad   bool
	}{
		{sel: "", match: true},
		{sel: "team=a", match: true},
		{sel: "team==a", match: true},
		{sel: "team=a,env=prod", match: true},
		{sel: " team = a , env = prod ", match: true},
		{sel: "team=b", match: false},
		{sel: "team=a,env=dev", match: false},
		{sel: "team!=b", match: true},
		{sel: "team!=a", match: false},
		{sel: "owner!=x", match: true},
		{sel: "team", match: true},
		{sel: "owner", match: false},
		{sel: "team=a,", bad: true},
		{sel: "=a", bad: true},
		{sel: "team=a b", bad: true},
		{sel: "-team=a", bad: true},
	} {
		t.Run(tc.sel, func(t *testing.T) {
			s, err := ParseSelector(tc.sel)
			if tc.bad {
				require.ErrorIs(t, err, ErrLabels)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.match, s.Matches(labels))
		})
	}
}

// Labels are stored by the create commands and SetLabels, kept by a
// Configuration's replacement, and a malformed set changes nothing.
func TestLabelsApply(t *testing.T) {
	f := newFx(t)
	team := map[string]string{"team": "a"}
	ns := f.must(CmdCreateNamespace, CreateNamespace{ID: "ns3", Name: "three", Labels: team}).(Namespace)
	require.Equal(t, team, ns.Labels)
	cf := f.must(CmdPutConfiguration, PutConfiguration{ID: "c3", NamespaceID: "ns3", Name: "cfg",
		Document: json.RawMessage(`{}`), Labels: team}).(Configuration)
	require.Equal(t, team, cf.Labels)
	a := f.must(CmdCreateAgent, CreateAgent{ID: "a3", NamespaceID: "ns3", Name: "bot", ConfigurationID: "c3", Labels: team}).(Agent)
	require.Equal(t, team, a.Labels)
	b := f.must(CmdCreateRoleBinding, CreateRoleBinding{ID: "b3", Role: RoleViewer, NamespaceID: "ns3",
		SubjectKind: PrincipalUser, Subject: "bob", Labels: team}).(RoleBinding)
	require.Equal(t, team, b.Labels)

	// A replacement of the document keeps the labels.
	cf = f.must(CmdPutConfiguration, PutConfiguration{ID: "c3", NamespaceID: "ns3", Name: "cfg", Document: json.RawMessage(`{"x":1}`)}).(Configuration)
	require.Equal(t, team, cf.Labels)
	require.EqualValues(t, 2, cf.Generation)

	// SetLabels replaces; a Configuration's generation stays.
	other := map[string]string{"team": "b", "tier": "gold"}
	cf = f.must(CmdSetConfigurationLabels, SetLabels{ID: "c3", Labels: other}).(Configuration)
	require.Equal(t, other, cf.Labels)
	require.EqualValues(t, 2, cf.Generation)
	require.Equal(t, other, f.must(CmdSetAgentLabels, SetLabels{ID: "a3", Labels: other}).(Agent).Labels)
	require.Equal(t, other, f.must(CmdSetRoleBindingLabels, SetLabels{ID: "b3", Labels: other}).(RoleBinding).Labels)
	require.Nil(t, f.must(CmdSetNamespaceLabels, SetLabels{ID: "ns3", Labels: map[string]string{}}).(Namespace).Labels)
	got, _ := f.m.RoleBinding("b3")
	require.Equal(t, other, got.Labels)
	got.Labels["team"] = "mutated" // reads are copies
	got, _ = f.m.RoleBinding("b3")
	require.Equal(t, "b", got.Labels["team"])

	bad := map[string]string{"team": "not ok"}
	for name, tc := range map[string]struct {
		typ Named
		p   any
	}{
		"namespace":           {CmdCreateNamespace, CreateNamespace{ID: "ns4", Name: "four", Labels: bad}},
		"configuration":       {CmdPutConfiguration, PutConfiguration{ID: "c4", NamespaceID: "ns3", Name: "c4", Document: json.RawMessage(`{}`), Labels: bad}},
		"agent":               {CmdCreateAgent, CreateAgent{ID: "a4", NamespaceID: "ns3", Name: "b4", ConfigurationID: "c3", Labels: bad}},
		"role binding":        {CmdCreateRoleBinding, CreateRoleBinding{ID: "b4", Role: RoleViewer, NamespaceID: "ns3", SubjectKind: PrincipalUser, Subject: "carl", Labels: bad}},
		"set namespace":       {CmdSetNamespaceLabels, SetLabels{ID: "ns3", Labels: bad}},
		"set configuration":   {CmdSetConfigurationLabels, SetLabels{ID: "c3", Labels: bad}},
		"set agent":           {CmdSetAgentLabels, SetLabels{ID: "a3", Labels: bad}},
		"set role binding":    {CmdSetRoleBindingLabels, SetLabels{ID: "b3", Labels: bad}},
		"set unknown agent":   {CmdSetAgentLabels, SetLabels{ID: "nope", Labels: team}},
		"set unknown binding": {CmdSetRoleBindingLabels, SetLabels{ID: "nope", Labels: team}},
	} {
		t.Run(name, func(t *testing.T) {
			before := f.m.Digest()
			_, err := f.apply(tc.typ, tc.p)
			require.Error(t, err)
			if strings.HasPrefix(name, "set unknown") {
				require.ErrorIs(t, err, ErrNotFound)
			} else {
				require.ErrorIs(t, err, ErrInvalid)
				require.ErrorIs(t, err, ErrLabels)
			}
			require.Equal(t, before, f.m.Digest(), "a refused command changed the state")
		})
	}
}

// A state with labels round-trips through the snapshot; one without any
// (as every snapshot written before labels) writes no labels section and
// restores unlabelled.
func TestLabelsSnapshot(t *testing.T) {
	f := newFx(t)
	plain, err := f.m.MarshalSnapshot()
	require.NoError(t, err)
	require.False(t, bytes.Contains(plain, []byte("labels")), "a state without labels writes no labels section")

	team := map[string]string{"team": "a", "example.com/owner": "ops"}
	f.must(CmdSetNamespaceLabels, SetLabels{ID: "ns1", Labels: team})
	f.must(CmdSetConfigurationLabels, SetLabels{ID: "c1", Labels: team})
	f.must(CmdSetAgentLabels, SetLabels{ID: "a1", Labels: team})
	f.must(CmdCreateRoleBinding, CreateRoleBinding{ID: "b1", Role: RoleViewer, NamespaceID: "ns1",
		SubjectKind: PrincipalUser, Subject: "bob", Labels: team})
	snap, err := f.m.MarshalSnapshot()
	require.NoError(t, err)
	m := NewMachine()
	require.NoError(t, m.RestoreSnapshot(snap))
	require.Equal(t, f.m.Digest(), m.Digest())
	ns, _ := m.Namespace("ns1")
	cf, _ := m.Configuration("c1")
	a, _ := m.Agent("a1")
	b, _ := m.RoleBinding("b1")
	for _, got := range []map[string]string{ns.Labels, cf.Labels, a.Labels, b.Labels} {
		require.Equal(t, team, got)
	}

	old := NewMachine()
	require.NoError(t, old.RestoreSnapshot(plain))
	a, _ = old.Agent("a1")
	require.Nil(t, a.Labels)

	v2, err := os.ReadFile("testdata/snapshot-v2.bin")
	require.NoError(t, err)
	m2 := NewMachine()
	require.NoError(t, m2.RestoreSnapshot(v2))
	for _, ns := range m2.Namespaces() {
		require.Nil(t, ns.Labels)
	}
}
