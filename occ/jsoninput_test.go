package occ_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/occ"
)

// TestJSONInputErrors: a Configuration document that does not parse, or
// is not an object, is refused before anything is sent, with exit 2 and
// the file, line and column (in characters) of the error.
func TestJSONInputErrors(t *testing.T) {
	h := newHarness(t)
	h.ok("namespace", "create", "team")
	for _, tc := range []struct {
		name, file, content string
		stdin               bool
		want                []string
	}{
		{name: "trailing comma", file: "comma.json", content: "{\n  \"agents\": {\n    \"list\": [],\n  }\n}\n",
			want: []string{"invalid JSON in ", "comma.json at line 4, column 3", "invalid character '}'"}},
		{name: "truncated", file: "cut.json", content: `{"agents": 1`,
			want: []string{"cut.json at line 1, column 13", "unexpected end of JSON input"}},
		{name: "bad literal", file: "lit.json", content: "{\n  \"a\": tru\n}",
			want: []string{"lit.json at line 2, column 11", "in literal true"}},
		{name: "trailing data", file: "two.json", content: `{"a":1} x`,
			want: []string{"two.json at line 1, column 9", "after top-level value"}},
		{name: "characters, not bytes", file: "utf8.json", content: `{"é€": 1,}`,
			want: []string{"utf8.json at line 1, column 10"}},
		{name: "an array", file: "array.json", content: "\n  [1, 2]",
			want: []string{"array.json at line 2, column 3", "the document is a JSON array, want an object"}},
		{name: "stdin", stdin: true, content: "{\n\n  oops\n}",
			want: []string{"invalid JSON in stdin at line 3, column 3", "invalid character 'o'"}},
		{name: "YAML syntax", file: "bad.yaml", content: "agents:\n  list: [1\n",
			want: []string{"bad.yaml is neither JSON nor YAML", "line"}},
		{name: "YAML list", file: "list.yaml", content: "- a\n- b\n", want: []string{"list.yaml is not a YAML mapping"}},
		{name: "empty", file: "empty.json", content: " \n", want: []string{"empty.json is empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r result
			if tc.stdin {
				r = h.runIn([]byte(tc.content), "-n", "team", "config", "create", "c", "-f", "-")
			} else {
				r = h.run("-n", "team", "config", "create", "c", "-f", h.file(tc.file, tc.content))
			}
			require.Equal(t, occ.ExitUsage, r.code, r.stdout+r.stderr)
			for _, w := range tc.want {
				require.Contains(t, r.stderr, w)
			}
			require.NotContains(t, r.stderr, "Go value", "no Go types")
			require.NotContains(t, r.stderr, "INVALID_REQUEST", "refused before anything is sent")
			require.Equal(t, "[]\n", h.ok("-n", "team", "config", "list", "-o", "json"), "nothing created")
		})
	}
	// The same checks guard update.
	h.ok("-n", "team", "config", "create", "c", "-f", h.file("ok.json", `{}`))
	r := h.run("-n", "team", "config", "update", "c", "-f", h.file("upd.json", "{\n  \"a\": [1 2]\n}"))
	require.Equal(t, occ.ExitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "upd.json at line 2, column 11")
}
