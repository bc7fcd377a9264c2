package occ_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api"
	"oce.dev/oce/coordinator/api/apitest"
	"oce.dev/oce/occ"
)

// TestAuditTimeForms: --since and --until take RFC 3339, a date, today,
// yesterday (local midnight of the injected clock's zone) and a duration
// ago; the coordinator is asked for exactly that instant. Anything else is
// a usage error listing the forms, never Go's layout string, and nothing
// is asked.
func TestAuditTimeForms(t *testing.T) {
	h := newHarness(t)
	cet := time.FixedZone("CET", 3600)
	h.now = func() time.Time { return time.Date(2026, 12, 1, 10, 30, 0, 0, cet) } // 09:30Z
	var mu sync.Mutex
	var asked []url.Values
	handler := api.New(api.Config{Token: token, Metrics: prometheus.NewRegistry(), WithActor: apitest.WithActor}, h.b)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.Query())
		mu.Unlock()
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	h.env["OCC_SERVER"] = srv.URL

	for _, tc := range []struct {
		name       string
		args       []string
		since      string // the query's since ("" = none)
		until      string
		usageError bool
		// errWant is in a usage error's message ("" = the list of forms).
		errWant string
	}{
		{name: "today", args: []string{"--since", "today"}, since: "2026-11-30T23:00:00Z"},
		{name: "yesterday", args: []string{"--since", "Yesterday"}, since: "2026-11-29T23:00:00Z"},
		{name: "all of yesterday", args: []string{"--since", "yesterday", "--until", "today"},
			since: "2026-11-29T23:00:00Z", until: "2026-11-30T23:00:00Z"},
		{name: "hours ago", args: []string{"--since", "24h"}, since: "2026-11-30T09:30:00Z"},
		{name: "minutes ago", args: []string{"--since", "90m"}, since: "2026-12-01T08:00:00Z"},
		{name: "days ago", args: []string{"--since", "7d"}, since: "2026-11-24T09:30:00Z"},
		{name: "date", args: []string{"--since", "2026-11-15"}, since: "2026-11-14T23:00:00Z"},
		{name: "RFC 3339", args: []string{"--since", "2026-11-20T12:00:00+02:00", "--until", "2026-11-20T12:30:00.5Z"},
			since: "2026-11-20T10:00:00Z", until: "2026-11-20T12:30:00.5Z"},
		{name: "until a duration ago", args: []string{"--until", "1h"}, until: "2026-12-01T08:30:00Z"},
		{name: "none", args: nil},
		{name: "typo", args: []string{"--since", "yesterdy"}, usageError: true},
		{name: "bad date", args: []string{"--since", "2026-13-01"}, usageError: true},
		{name: "bad until", args: []string{"--until", "tomorrow"}, usageError: true},
		{name: "the future", args: []string{"--since", "-1h"}, usageError: true},
		{name: "empty range", args: []string{"--since", "today", "--until", "yesterday"}, usageError: true,
			errWant: "is not before --until"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			asked = nil
			mu.Unlock()
			r := h.run(append([]string{"audit"}, tc.args...)...)
			mu.Lock()
			defer mu.Unlock()
			if tc.usageError {
				require.Equal(t, occ.ExitUsage, r.code, r.stderr)
				if tc.errWant == "" {
					require.Contains(t, r.stderr, "today, yesterday")
					require.Contains(t, r.stderr, "a duration ago")
				} else {
					require.Contains(t, r.stderr, tc.errWant)
				}
				require.NotContains(t, r.stderr, "2006-01-02", "Go's layout string is no help")
				require.NotContains(t, r.stderr, "cannot parse")
				require.Empty(t, asked, "a bad value asks nothing")
				return
			}
			require.Equal(t, 0, r.code, r.stderr)
			require.Len(t, asked, 1)
			for key, want := range map[string]string{"since": tc.since, "until": tc.until} {
				got := asked[0].Get(key)
				if want == "" {
					require.Empty(t, got, key)
					continue
				}
				wt, err := time.Parse(time.RFC3339Nano, want)
				require.NoError(t, err)
				gt, err := time.Parse(time.RFC3339Nano, got)
				require.NoError(t, err, key)
				require.True(t, wt.Equal(gt), "%s: want %s, asked %s", key, want, got)
			}
		})
	}
}
