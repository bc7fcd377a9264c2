package logging

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPretty(t *testing.T) {
	for _, tc := range []struct {
		name, line, text, level string
		ok                      bool
	}{
		{"an slog record: time, level, msg, then the rest in order",
			`{"time":"2026-12-04T18:40:33.115254989Z","level":"WARN","msg":"nodehost exited","component":"harnessd","status":"exit 1","restartInMs":2000}`,
			`2026-12-04T18:40:33.115Z WARN  nodehost exited component=harnessd status="exit 1" restartInMs=2000`, "warn", true},
		{"another zone is shown in UTC", `{"time":"2026-12-04T19:40:33+01:00","level":"info","msg":"ready"}`,
			`2026-12-04T18:40:33.000Z INFO  ready`, "info", true},
		{"message and timestamp spelled otherwise; nested values compact",
			`{"timestamp":"x","level":"warning","message":"retrying","span":{"name": "a"},"ok":true,"n":null}`,
			`x WARN  retrying span={"name":"a"} ok=true n=null`, "warn", true},
		{"no time or level", `{"msg":"hello","k":""}`, `hello k=""`, "", true},
		{"control characters cannot forge a line", `{"msg":"a\nb","k":"c\rd"}`, `"a\nb" k="c\rd"`, "", true},
		{"quotes and equals are quoted", `{"msg":"m","k":"a=b","q":"say \"hi\""}`, `m k="a=b" q="say \"hi\""`, "", true},
		{"plain text passes", `gateway listening on 18789`, "", "", false},
		{"a JSON array is not a record", `[1,2]`, "", "", false},
		{"two objects are not one record", `{"msg":"a"}{"msg":"b"}`, "", "", false},
		{"broken JSON", `{"msg":"a"`, "", "", false},
		{"empty", ``, "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text, level, ok := Pretty([]byte(tc.line))
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.text, text)
			require.Equal(t, tc.level, level)
		})
	}
}
