package occ

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDecodeJSONInputTypeErrors: a value of the wrong type is located at
// its start, named by its field and the JSON type wanted, never Go's.
func TestDecodeJSONInputTypeErrors(t *testing.T) {
	type doc struct {
		Name  string   `json:"name"`
		Count int      `json:"count"`
		Tags  []string `json:"tags"`
		On    bool     `json:"on"`
	}
	for _, tc := range []struct {
		name, in, want string
	}{
		{name: "string for a number", in: "{\n  \"count\": \"three\"\n}", want: `f.json at line 2, column 12: field "count" is a JSON string, want a number`},
		{name: "number for a string", in: `{"name": 12345}`, want: `f.json at line 1, column 10: field "name" is a JSON number, want a string`},
		{name: "object for an array", in: "{\"tags\":\n\t{\"a\": 1}}", want: `f.json at line 2, column 2: field "tags" is a JSON object, want an array`},
		{name: "string for a boolean", in: `{"name":"x","on":"yes"}`, want: `f.json at line 1, column 18: field "on" is a JSON string, want a boolean`},
		{name: "a top-level string", in: ` "doc"`, want: `f.json at line 1, column 2: the document is a JSON string, want an object`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d doc
			var v any = &d
			if tc.name == "a top-level string" {
				v = &map[string]any{}
			}
			err := decodeJSONInput("f.json", []byte(tc.in), v, "an object")
			require.Error(t, err)
			require.True(t, errors.Is(err, ErrBadJSON))
			require.True(t, isUsage(err))
			require.Contains(t, err.Error(), tc.want)
		})
	}
	require.NoError(t, decodeJSONInput("f.json", []byte(`{"name":"x","count":3}`), &doc{}, "an object"))
}
