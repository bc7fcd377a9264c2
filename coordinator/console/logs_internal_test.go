package console

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReadLinesRendersRecords(t *testing.T) {
	in := `{"time":"2026-12-04T18:40:33.1Z","level":"WARN","msg":"nodehost exited","status":"exit 1"}` + "\n" +
		`{"level":"error","msg":"boom"}` + "\n" + "plain text\n"
	require.Equal(t, []logLine{
		{Text: `2026-12-04T18:40:33.100Z WARN  nodehost exited status="exit 1"`, Level: "warn"},
		{Text: "ERROR boom", Level: "error"},
		{Text: "plain text"},
	}, readLines(strings.NewReader(in), false))
	raw := readLines(strings.NewReader(in), true)
	require.Equal(t, strings.Split(strings.TrimSpace(in), "\n"), []string{raw[0].Text, raw[1].Text, raw[2].Text}, "raw keeps the lines")
	require.Equal(t, []string{"warn", "error", ""}, []string{raw[0].Level, raw[1].Level, raw[2].Level}, "and still marks the levels")
}
