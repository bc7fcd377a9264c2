package openclawschema

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/shared/netns"
	"oce.dev/oce/shared/runtimes"
)

// The real runtime runs only inside a loopback-only namespace.
func TestMain(m *testing.M) { netns.Main(m, netns.Options{PrivateTmp: true}) }

func gunzip(t *testing.T, b []byte) []byte {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	require.NoError(t, err)
	out, err := io.ReadAll(zr)
	require.NoError(t, err)
	return out
}

// TestSchemaMatchesInstalledRuntime regenerates the schema from the
// installed pinned runtime and fails on drift (run go generate).
func TestSchemaMatchesInstalledRuntime(t *testing.T) {
	p, err := runtimes.Ensure(context.Background())
	require.NoError(t, err)
	got, err := Generate(t.Context(), p)
	require.NoError(t, err)
	require.True(t, bytes.Equal(gunzip(t, got), gunzip(t, Embedded())),
		"the embedded schema drifted from the installed runtime's: go generate ./coordinator/admission/openclawschema")
}

// TestSameCheckAsTheGateway: documents the real gateway's own check
// (`openclaw config validate`, what it applies at start) accepts or
// refuses, and this package agrees on each.
func TestSameCheckAsTheGateway(t *testing.T) {
	p, err := runtimes.Ensure(context.Background())
	require.NoError(t, err)
	for _, tc := range []struct {
		name, doc, path string
	}{
		{"minimal", `{"gateway":{"mode":"local"}}`, ""},
		{"demo embedded", `{"agents":{"defaults":{"model":{"primary":"openai/gpt-5.5"},"models":{"openai/gpt-5.5":{"alias":"main","agentRuntime":{"id":"openclaw"}}}}},"gateway":{"mode":"local"}}`, ""},
		{"unknown top-level key", `{"gateway":{"mode":"local"},"gatewy":{}}`, "gatewy"},
		{"unknown nested key", `{"gateway":{"mode":"local","bogus":1}}`, "gateway.bogus"},
		{"wrong type", `{"gateway":{"mode":"local","port":"x"}}`, "gateway.port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, out, err := RuntimeValidate(t.Context(), p, []byte(tc.doc))
			require.NoError(t, err)
			mine := Validate([]byte(tc.doc))
			if tc.path == "" {
				require.True(t, ok, "the gateway accepts it:\n%s", out)
				require.NoError(t, mine)
				return
			}
			require.False(t, ok, "the gateway refuses it:\n%s", out)
			var v *Violation
			require.ErrorAs(t, mine, &v)
			require.Equal(t, tc.path, v.Path)
		})
	}
}

// TestSensitiveMatchesInstalledRuntime regenerates the sensitive paths from
// the installed pinned runtime and fails on drift (run go generate).
func TestSensitiveMatchesInstalledRuntime(t *testing.T) {
	p, err := runtimes.Ensure(context.Background())
	require.NoError(t, err)
	got, err := GenerateSensitive(t.Context(), p)
	require.NoError(t, err)
	require.Equal(t, string(embeddedSensitive), string(got),
		"the embedded sensitive paths drifted from the installed runtime's: go generate ./coordinator/admission/openclawschema")
}

// TestSensitivePaths: the embedded list carries the runtime's markers of
// the settings issue 25 names.
func TestSensitivePaths(t *testing.T) {
	paths := SensitivePaths()
	require.IsIncreasing(t, paths)
	for _, p := range []string{"cron.webhookToken", "hooks.gmail.pushToken", "channels.line.channelAccessToken",
		"channels.line.channelSecret", "models.providers.*.apiKey", "models.providers.*.headers.*"} {
		require.Contains(t, paths, p)
	}
}
