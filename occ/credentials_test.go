package occ_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/compute/memory"
	"oce.dev/oce/occ"
)

// TestCredentialValuesNeverInArgv: occ credential takes a value from stdin
// or from a 0600 file, never from the command line; the value is stored in
// the Namespace's source and never printed; every command of the tree
// works on metadata.
func TestCredentialValuesNeverInArgv(t *testing.T) {
	h := newHarness(t)
	h.ok("namespace", "create", "team")
	ns, ok := h.b.M.NamespaceByName("team")
	require.True(t, ok)
	d := h.b.Driver().(*memory.Driver)

	// stdin
	r := h.runIn([]byte("  sk-occ-stdin-value\n"), "-n", "team", "credential", "create", "openai")
	require.Equal(t, 0, r.code, r.stderr)
	require.NotContains(t, r.stdout+r.stderr, "sk-occ-stdin-value")
	require.Contains(t, r.stdout, "credential:openai")
	v, version, ok := d.Credential(ns.ID, "openai")
	require.True(t, ok)
	require.Equal(t, int64(1), version)
	require.Equal(t, map[string][]byte{"value": []byte("sk-occ-stdin-value")}, v, "surrounding whitespace trimmed")

	// files of mode 0600, each a key
	a, b := h.file("a.key", "sk-occ-file-a\n"), h.file("b.key", "sk-occ-file-b")
	out := h.ok("-n", "team", "secret", "create", "pair", "--from-file", "a="+a, "--from-file", b, "-o", "json")
	require.NotContains(t, out, "sk-occ-file")
	var src wire.CredentialSource
	require.NoError(t, json.Unmarshal([]byte(out), &src))
	require.Equal(t, []string{"a", "b.key"}, src.Keys)
	v, _, _ = d.Credential(ns.ID, "pair")
	require.Equal(t, "sk-occ-file-a", string(v["a"]))

	// a file others may read is refused, and so is an empty stdin
	open := h.file("open.key", "sk-occ-open")
	require.NoError(t, os.Chmod(open, 0o640))
	r = h.run("-n", "team", "credential", "create", "open", "--from-file", open)
	require.Equal(t, occ.ExitErr, r.code)
	require.Contains(t, r.stderr, "0600")
	r = h.runIn(nil, "-n", "team", "credential", "create", "empty")
	require.Equal(t, occ.ExitErr, r.code)
	require.Contains(t, r.stderr, "no value on stdin")

	// the command line takes no value: an extra argument is a usage error,
	// and no flag of the tree holds one
	r = h.run("-n", "team", "credential", "create", "argv", "sk-occ-argv")
	require.Equal(t, occ.ExitUsage, r.code)
	root := occ.NewRootCommand(occ.Options{})
	cred, _, err := root.Find([]string{"credential"})
	require.NoError(t, err)
	for _, c := range cred.Commands() {
		for _, name := range []string{"value", "literal", "from-literal", "password", "token"} {
			require.Nil(t, c.Flags().Lookup(name), "occ credential %s --%s", c.Name(), name)
		}
	}

	// rotate, list, get, withdraw
	r = h.runIn([]byte("sk-occ-rotated"), "-n", "team", "credential", "rotate", "openai")
	require.Equal(t, 0, r.code, r.stderr)
	_, version, _ = d.Credential(ns.ID, "openai")
	require.Equal(t, int64(2), version)
	list := h.ok("-n", "team", "credential", "list", "-o", "wide")
	require.Contains(t, list, "openai")
	require.Contains(t, list, "credential:pair#a,credential:pair#b")
	require.NotContains(t, list, "sk-occ")
	require.Equal(t, "credential/openai\ncredential/pair\n", h.ok("-n", "team", "credential", "list", "-o", "name"))
	require.Contains(t, h.ok("-n", "team", "credential", "get", "openai", "-o", "yaml"), "version: 2")
	require.Contains(t, h.ok("-n", "team", "credential", "withdraw", "openai"), "credential source openai deleted")
	_, _, ok = d.Credential(ns.ID, "openai")
	require.False(t, ok)

	// register copies a location of the driver (the bootstrap token is a
	// cluster admin's); both location flags at once are a usage error
	d.SetLocation("local:legacy", map[string][]byte{"value": []byte("sk-occ-legacy")})
	r = h.run("-n", "team", "credential", "register", "legacy", "--from-local", "legacy", "-o", "wide")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "local:legacy", "-o wide shows where it came from")
	r = h.run("-n", "team", "credential", "register", "x", "--from-local", "a", "--from-secret", "b")
	require.Equal(t, occ.ExitUsage, r.code)
	r = h.run("-n", "team", "credential", "register", "x")
	require.Equal(t, occ.ExitUsage, r.code)
	require.False(t, strings.Contains(h.ok("-n", "team", "credential", "list", "-o", "json"), "sk-occ"))
}
