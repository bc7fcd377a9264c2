package abusetest

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api"
	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/authn/oidctest"
	"oce.dev/oce/coordinator/server"
	"oce.dev/oce/coordinator/state"
)

// Caps the suite holds the coordinator to.
const (
	// maxRecordBytes bounds one refused request's audit record as served.
	maxRecordBytes = 400
	// maxRaftGrowth bounds raft.db's growth over a flood of refused writes
	// (Bolt grows its file in steps; the flood's records are ~100 KB).
	maxRaftGrowth = 4 << 20
	// maxHeapGrowth bounds the live heap's growth over a flood.
	maxHeapGrowth = 32 << 20
)

// huge is a name or document far beyond every cap.
var huge = strings.Repeat("a", 900<<10)

// refusedFlood sends n refused writes of every kind as token and returns
// how many got each status.
func refusedFlood(tg *target, token string, n int) map[int]int {
	doc := `{"gateway":{"mode":"local"},"messages":{"ackReaction":"` + huge + `"}}`
	kinds := []struct {
		method, path string
		body         any
	}{
		{"POST", "/v1/namespaces", map[string]any{"name": huge}},                                    // 400: validated first
		{"POST", "/v1/namespaces/team/configurations", `{"name":"c","document":` + doc + `}`},       // 403: cannot see team
		{"DELETE", "/v1/namespaces/" + strings.Repeat("n", 60<<10), nil},                            // 400: path segment
		{"GET", "/v1/namespaces/" + strings.Repeat("g", 70<<10), nil},                               // 431: header cap
		{"POST", "/v1/namespaces", map[string]any{"name": "fresh"}},                                 // 403: a compact record
		{"PUT", "/v1/restrictions/r", map[string]any{"policy": strings.Repeat("forbid ", 100<<10)}}, // 403
	}
	got := map[int]int{}
	for i := range n {
		k := kinds[i%len(kinds)]
		s, _ := tg.call(token, k.method, k.path, k.body)
		got[s]++
	}
	return got
}

// TestAbuse drives the floods at one coordinator and holds it to its caps.
func TestAbuse(t *testing.T) {
	tg := start(t, options{timeouts: 500 * time.Millisecond})
	tg.must(http.StatusCreated, tg.token, "POST", "/v1/namespaces", map[string]any{"name": "team"}, nil)
	mallory := tg.user("mallory")

	t.Run("reads of missing names write nothing", func(t *testing.T) {
		before, aside := tg.settled(), tg.aside()
		for i := range 100 {
			for _, p := range []string{"/v1/namespaces/gone-%d", "/v1/namespaces/team/agents/gone-%d",
				"/v1/namespaces/team/configurations/gone-%d"} {
				s, _ := tg.call(tg.token, "GET", fmt.Sprintf(p, i), nil)
				require.Equal(t, http.StatusNotFound, s)
			}
		}
		require.Equal(t, before+tg.aside()-aside, tg.lastIndex(), "300 reads of missing names appended no Raft entry")
	})

	t.Run("refused writes stay bounded", func(t *testing.T) {
		const n = 300
		db, heap0, rss0 := tg.raftDB(), heap(), rss(t)
		auditBefore, recsBefore := tg.auditBytes()
		began := time.Now()
		got := refusedFlood(tg, mallory, n)
		took := time.Since(began)
		require.Zero(t, got[http.StatusOK]+got[http.StatusCreated], "%v", got)
		// Refused by validation, authorization, the header cap, or (when the
		// flood outruns the principal's rate) the rate limit.
		require.Equal(t, n, got[http.StatusBadRequest]+got[http.StatusForbidden]+got[http.StatusRequestHeaderFieldsTooLarge]+
			got[http.StatusTooManyRequests], "%v", got)
		auditAfter, recsAfter := tg.auditBytes()
		growth := tg.raftDB() - db
		heapGrowth := int64(heap()) - int64(heap0)
		rssGrowth := int64(rss(t)) - int64(rss0)
		perRequest := float64(auditAfter-auditBefore) / n
		t.Logf("%d refused writes (%v): +%d audit records, %.0f audit bytes per refused request, raft.db +%s, heap %+.2f MB, RSS %+.2f MB",
			n, got, recsAfter-recsBefore, perRequest, mb(float64(growth)), float64(heapGrowth)/(1<<20), float64(rssGrowth)/(1<<20))
		// One actor's refusals fold: a burst of 30 records, then one a second.
		require.LessOrEqual(t, recsAfter-recsBefore, 31+int(took.Seconds()), "in %s", took)
		require.LessOrEqual(t, perRequest, float64(maxRecordBytes))
		require.Less(t, growth, int64(maxRaftGrowth))
		require.Less(t, heapGrowth, int64(maxHeapGrowth))
		var list wire.List[state.AuditRecord]
		tg.must(http.StatusOK, tg.token, "GET", "/v1/audit?limit=1000", nil, &list)
		for _, r := range list.Items {
			raw, _ := json.Marshal(r)
			require.Less(t, len(raw), 2*maxRecordBytes, "every record is compact: %.200s", raw)
			require.NotEqual(t, `Namespace::""`, r.Resource)
			if r.Actor == "user:mallory" {
				require.Empty(t, r.NamespaceID, "an outsider's refusals never land in a Namespace's log")
			}
		}
	})

	t.Run("forged JWTs fetch no keys", func(t *testing.T) {
		good, err := tg.issuer.Sign(oidctest.Claims{Subject: "alice"})
		require.NoError(t, err)
		tg.must(http.StatusOK, good, "GET", "/v1/whoami", nil, nil)
		before := tg.issuer.KeyFetches()
		forger, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		const n = 600
		statuses := floodForged(t, tg, forger, n)
		require.Equal(t, n, statuses[http.StatusUnauthorized], "%v", statuses)
		fetched := tg.issuer.KeyFetches() - before
		t.Logf("%d forged JWTs from %d source addresses: %d key-set fetches", n, n, fetched)
		require.Zero(t, fetched, "within the refresh interval forged tokens fetch nothing")
		tg.must(http.StatusOK, good, "GET", "/v1/whoami", nil, nil)
	})

	t.Run("failed authentications lock a source out", func(t *testing.T) {
		c := fromSource(700)
		locked := 0
		for range api.DefaultFailedAuthBurst + 10 {
			if s, _ := tg.callWith(c, "oce_"+strings.Repeat("0", 32)+"_"+strings.Repeat("A", 43), "GET", "/v1/namespaces", nil); s == http.StatusTooManyRequests {
				locked++
			}
		}
		require.GreaterOrEqual(t, locked, 9, "beyond its burst of failures the source is locked out")
		s, _ := tg.callWith(c, tg.token, "GET", "/v1/namespaces", nil)
		require.Equal(t, http.StatusTooManyRequests, s, "even a valid token waits")
		s, _ = tg.callWith(fromSource(701), tg.token, "GET", "/v1/namespaces", nil)
		require.Equal(t, http.StatusOK, s, "other sources are not affected")
	})

	t.Run("token mints stay bounded", func(t *testing.T) {
		idx0 := tg.lastIndex()
		statuses := map[int]int{}
		var ids []string
		for range 2 * state.MaxUsableTokens {
			s, b := tg.patient(mallory, "POST", "/v1/tokens", map[string]any{})
			statuses[s]++
			var m wire.MintedToken
			if s == http.StatusCreated && json.Unmarshal(b, &m) == nil {
				ids = append(ids, m.Record.ID)
			}
		}
		require.Equal(t, state.MaxUsableTokens-1, statuses[http.StatusCreated], "%v", statuses)
		require.Equal(t, state.MaxUsableTokens+1, statuses[http.StatusConflict], "%v", statuses)
		atCap, aside := tg.lastIndex(), tg.aside()
		for range 50 {
			s, _ := tg.patient(mallory, "POST", "/v1/tokens", map[string]any{})
			require.Equal(t, http.StatusConflict, s)
		}
		// the waits out of 429s may add one rate-limit record; nothing else
		require.Equal(t, atCap+tg.aside()-aside, tg.lastIndex(), "a mint refused at the bound appends no Raft entry")
		// Mint and revoke in a loop: the records stay bounded.
		for range 60 {
			s, _ := tg.patient(mallory, "DELETE", "/v1/tokens/"+ids[0], nil)
			require.Equal(t, http.StatusOK, s)
			ids = ids[1:]
			s, b := tg.patient(mallory, "POST", "/v1/tokens", map[string]any{})
			require.Equal(t, http.StatusCreated, s, "%s", b)
			var m wire.MintedToken
			require.NoError(t, json.Unmarshal(b, &m))
			ids = append(ids, m.Record.ID)
		}
		var list wire.List[wire.Token]
		tg.must(http.StatusOK, tg.token, "GET", "/v1/tokens?user=mallory", nil, &list)
		require.LessOrEqual(t, len(list.Items), state.MaxTokenRecords)
		t.Logf("%d mint attempts + 60 mint/revoke rounds: %d token records kept, %d Raft entries",
			2*state.MaxUsableTokens, len(list.Items), tg.lastIndex()-idx0)
	})

	t.Run("idle connections are closed", func(t *testing.T) {
		const n = 100
		var conns []net.Conn
		for i := range n {
			c, err := net.Dial("tcp", tg.addr)
			require.NoError(t, err)
			conns = append(conns, c)
			if i%2 == 0 {
				_, err = fmt.Fprintf(c, "GET /livez HTTP/1.1\r\nHost: x\r\n") // never finished
			} else {
				_, err = fmt.Fprintf(c, "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n") // then idle
			}
			require.NoError(t, err)
		}
		start := time.Now()
		var wg sync.WaitGroup
		closed := make(chan bool, n)
		for _, c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
				br := bufio.NewReader(c)
				_, err := io.Copy(io.Discard, br)
				closed <- err == nil
			}()
		}
		wg.Wait()
		close(closed)
		count := 0
		for ok := range closed {
			if ok {
				count++
			}
		}
		t.Logf("%d idle or half-open connections closed by the server within %s", count, time.Since(start).Round(time.Millisecond))
		require.Equal(t, n, count, "every idle or half-open connection is closed by the server")
	})
}

// TestAuditRetentionUnderFlood: refusals by many actors are pruned to the
// count limit through the replicated command, every pruned record exported
// first.
func TestAuditRetentionUnderFlood(t *testing.T) {
	const limit = 200
	export := t.TempDir()
	tg := start(t, options{retention: server.AuditRetention{MaxRecords: limit, Every: 100 * time.Millisecond, ExportDir: export}})
	tg.must(http.StatusCreated, tg.token, "POST", "/v1/namespaces", map[string]any{"name": "team"}, nil)
	for i := range 12 {
		tok := tg.user(fmt.Sprintf("u%d", i))
		refusedFlood(tg, tok, 36)
	}
	var n int
	require.Eventually(t, func() bool {
		_, n = tg.auditBytes()
		return n <= limit
	}, 30*time.Second, 100*time.Millisecond, "the audit log is pruned to its limit")
	files, err := filepath.Glob(filepath.Join(export, "audit-*.jsonl"))
	require.NoError(t, err)
	exported := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		exported += strings.Count(string(b), "\n")
	}
	var list wire.List[state.AuditRecord]
	tg.must(http.StatusOK, tg.token, "GET", "/v1/audit?limit=1", nil, &list)
	require.Len(t, list.Items, 1)
	require.Equal(t, int(list.Items[0].Seq)-1, exported, "every record before the oldest kept one was exported")
	t.Logf("audit log held at %d records (limit %d); %d records exported in %d files", n, limit, exported, len(files))
}

// floodForged sends n forged JWTs, each from its own source address, 16
// at a time, and counts the statuses.
func floodForged(t testing.TB, tg *target, forger *ecdsa.PrivateKey, n int) map[int]int {
	var mu sync.Mutex
	statuses := map[int]int{}
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range n {
		kid := tg.issuer.CurrentKeyID()
		if i%2 == 1 {
			kid = fmt.Sprintf("forged-%d", i)
		}
		tok, err := oidctest.SignWith(forger, kid, map[string]any{"iss": tg.issuer.URL(), "aud": audience,
			"sub": "mallory", "groups": []string{"admins"}, "exp": time.Now().Add(time.Hour).Unix()})
		require.NoError(t, err)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s, _ := tg.callWith(fromSource(i), tok, "GET", "/v1/namespaces", nil)
			mu.Lock()
			statuses[s]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	return statuses
}
