package occ

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCopyPretty(t *testing.T) {
	long := `{"msg":"` + strings.Repeat("x", logLineBuffer) + `"}`
	for _, tc := range []struct {
		name, in, want string
	}{
		{"records rendered, text unchanged",
			"{\"time\":\"2026-12-04T18:40:33.1Z\",\"level\":\"INFO\",\"msg\":\"ready\",\"port\":8080}\nplain text line\n\n",
			"2026-12-04T18:40:33.100Z INFO  ready port=8080\nplain text line\n\n"},
		{"a last line without a newline", `{"msg":"last"}`, "last\n"},
		{"a text line without a newline stays so", "partial", "partial"},
		{"CRLF records", "{\"msg\":\"a\"}\r\n", "a\n"},
		{"a line longer than the buffer passes through", long + "\n{\"msg\":\"next\"}\n", long + "\nnext\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			require.NoError(t, copyPretty(&out, strings.NewReader(tc.in)))
			require.Equal(t, tc.want, out.String())
		})
	}
}
