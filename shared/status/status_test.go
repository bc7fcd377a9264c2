package status

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/logging"
	"oce.dev/oce/shared/phase"
)

const (
	testRevision = "rev-1"
	// Known answers from `printf 'openclaw-plugin-status/v1\0rev-N' | openssl dgst -sha256 -hmac test-key`.
	tokenRev1 = "fb9e18fd585626400bcee6bccae2d358da0a31c1c76a3f3ac70722b160127599"
	tokenRev2 = "52f18b89d304772634406c08aee9ed74f93b0aa6d6fca237faa3f86a20e6e510"
)

var testKey = []byte("test-key")

// startServer serves s on a loopback port until the test ends and returns
// its base URL.
func startServer(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return "http://" + ln.Addr().String()
}

func newTestServer(t *testing.T, mut func(*Options)) (*Server, string) {
	t.Helper()
	opts := Options{Component: "gateway", RevisionID: testRevision, RemoteStatusKey: testKey,
		Clock: func() time.Time { return time.Date(2026, 11, 29, 9, 30, 0, 0, time.UTC) }}
	if mut != nil {
		mut(&opts)
	}
	s := New(opts)
	return s, startServer(t, s)
}

type answer struct {
	code  int
	body  string
	ctype string
	cache string
}

func get(t *testing.T, url string, hdr map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{resp.StatusCode, string(b), resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control")}
}

func TestRemoteStatusTokenKnownAnswer(t *testing.T) {
	require.Equal(t, tokenRev1, RemoteStatusToken(testKey, "rev-1"))
	require.Equal(t, tokenRev2, RemoteStatusToken(testKey, "rev-2"))
}

func TestRoutesBeforeStartup(t *testing.T) {
	_, base := newTestServer(t, nil)
	for _, tc := range []struct {
		path string
		code int
		body string
	}{
		{PathReadyz, 503, NotReadyReason + "\n"},
		{PathLivez, 200, "ok\n"},
		{PathStartupz, 503, "starting\n"},
		{PathStatus, 200, `{"component":"gateway","held":false,"ready":false,"revisionId":"rev-1","started":false}` + "\n"},
		{PathRuntimeStatus, 200, `{"component":"gateway","held":false,"ready":false,"revisionId":"rev-1","started":false}` + "\n"},
		{PathPluginStatus, 503, `{"error":"NOT_PUBLISHED"}` + "\n"},
		{PathRuntimeImage, 404, `{"error":"NOT_PUBLISHED"}` + "\n"},
		{"/nope", 404, ""},
	} {
		t.Run(tc.path, func(t *testing.T) {
			a := get(t, base+tc.path, nil)
			require.Equal(t, tc.code, a.code)
			if tc.body != "" {
				require.Equal(t, tc.body, a.body)
			}
			if tc.path != "/nope" {
				require.Equal(t, "no-store", a.cache)
			}
		})
	}
	for _, p := range []string{PathDiagnostics, PathRuntimeDiagnostics} {
		a := get(t, base+p, nil)
		require.Equal(t, 200, a.code)
		var doc map[string]any
		require.NoError(t, json.Unmarshal([]byte(a.body), &doc))
		require.Equal(t, "gateway", doc["component"])
		require.Contains(t, doc, "uptimeMs")
		require.Contains(t, doc, "goroutines")
	}
	// Routes are read-only.
	resp, err := http.Post(base+PathReadyz, "text/plain", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	// HEAD works for probes that use it.
	resp, err = http.Head(base + PathLivez)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
}

func TestReadyAndStatusSections(t *testing.T) {
	s, base := newTestServer(t, func(o *Options) { o.ReadyCheckTimeout = 50 * time.Millisecond })
	s.SetStarted()
	require.Equal(t, 200, get(t, base+PathStartupz, nil).code)
	require.Equal(t, 503, get(t, base+PathReadyz, nil).code)

	s.SetReady(true)
	a := get(t, base+PathReadyz, nil)
	require.Equal(t, answer{200, "ok\n", "text/plain; charset=utf-8", "no-store"}, a)

	s.SetReadyCheck(func(context.Context) error { return errors.New("child /readyz 503") })
	require.Equal(t, answer{503, NotReadyReason + "\n", "text/plain; charset=utf-8", "no-store"}, get(t, base+PathReadyz, nil))
	s.SetReadyCheck(func(context.Context) error { return nil })
	require.Equal(t, 200, get(t, base+PathReadyz, nil).code)
	// A check that hangs is cut off by ReadyCheckTimeout.
	s.SetReadyCheck(func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
	require.Equal(t, 503, get(t, base+PathReadyz, nil).code)
	s.SetReadyCheck(nil)
	s.SetReady(false)
	require.Equal(t, 503, get(t, base+PathReadyz, nil).code)

	require.NoError(t, s.SetStatus("phase", map[string]string{"current": "native-spawn"}))
	require.NoError(t, s.SetStatus("image", map[string]string{"version": "2026.9.6"}))
	require.ErrorIs(t, s.SetStatus("runtimeFailure", 1), ErrReservedKey)
	require.ErrorIs(t, s.SetStatus("", 1), ErrReservedKey)
	require.Error(t, s.SetStatus("bad", make(chan int)))
	s.SetPluginStatus(PluginStatus{StartupID: "s1", PodUID: "p1", Phase: PluginPhaseReady})

	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(get(t, base+PathRuntimeStatus, nil).body), &doc))
	require.Equal(t, map[string]any{"current": "native-spawn"}, doc["phase"])
	require.Equal(t, true, doc["started"])
	require.Equal(t, map[string]any{"startupId": "s1", "podUid": "p1", "successfulPluginIds": []any{},
		"failures": []any{}, "phase": "ready"}, doc["pluginStatus"])
	require.Equal(t, `{"version":"2026.9.6"}`+"\n", get(t, base+PathRuntimeImage, nil).body)
	require.Equal(t, `{"startupId":"s1","podUid":"p1","successfulPluginIds":[],"failures":[],"phase":"ready"}`+"\n",
		get(t, base+PathPluginStatus, nil).body)
}

func TestHoldNeverWorksOnPoll(t *testing.T) {
	var logs bytes.Buffer
	s, base := newTestServer(t, func(o *Options) { o.Log = logging.New(&logs, slog.LevelInfo, "gatewayd") })
	var calls atomic.Int64
	s.SetReady(true)
	s.SetReadyCheck(func(context.Context) error { calls.Add(1); return nil })
	ok, reason, err := ReadyCheck(context.Background(), strings.TrimPrefix(base, "http://"))
	require.NoError(t, err)
	require.True(t, ok)
	require.Empty(t, reason)
	require.EqualValues(t, 1, calls.Load())
	_, port, err := net.SplitHostPort(strings.TrimPrefix(base, "http://"))
	require.NoError(t, err)
	ok, _, err = ReadyCheck(context.Background(), ":"+port)
	require.NoError(t, err)
	require.True(t, ok)
	require.EqualValues(t, 2, calls.Load())

	s.Hold(RuntimeFailure{Check: "model-probe", Code: codes.ModelProbeFailed,
		Cause: &codes.Cause{Kind: codes.CauseProcessExit, Detail: "exit-1"}})
	s.SetReady(true) // too late: a hold is forever
	s.Hold(RuntimeFailure{Check: "other", Code: codes.LoginFailed})
	want := NotReadyReason + "; startup check model-probe failed with MODEL_PROBE_FAILED"
	for range 100 {
		ok, reason, err := ReadyCheck(context.Background(), base)
		require.NoError(t, err)
		require.False(t, ok)
		require.Equal(t, want, reason)
	}
	require.EqualValues(t, 2, calls.Load(), "a readiness poll in hold ran the ready check")
	require.Equal(t, 200, get(t, base+PathLivez, nil).code)
	require.Equal(t, 200, get(t, base+PathStartupz, nil).code)

	var doc struct {
		Ready          bool           `json:"ready"`
		Held           bool           `json:"held"`
		RuntimeFailure RuntimeFailure `json:"runtimeFailure"`
	}
	require.NoError(t, json.Unmarshal([]byte(get(t, base+PathStatus, nil).body), &doc))
	require.False(t, doc.Ready)
	require.True(t, doc.Held)
	require.Equal(t, RuntimeFailure{Component: "gateway", Check: "model-probe",
		CheckedAt: time.Date(2026, 11, 29, 9, 30, 0, 0, time.UTC), Code: codes.ModelProbeFailed,
		Cause: &codes.Cause{Kind: codes.CauseProcessExit, Detail: "exit-1"}}, doc.RuntimeFailure)
	require.Contains(t, get(t, base+PathStatus, nil).body,
		`"runtimeFailure":{"component":"gateway","check":"model-probe","checkedAt":"2026-11-29T09:30:00Z","code":"MODEL_PROBE_FAILED","cause":{"kind":"PROCESS_EXIT","detail":"exit-1"}}`)
	f, held := s.Held()
	require.True(t, held)
	require.Equal(t, codes.ModelProbeFailed, f.Code)
	require.Equal(t, 1, strings.Count(logs.String(), "runtime failure held"))
}

func TestHoldSanitizesInput(t *testing.T) {
	for _, tc := range []struct {
		in   RuntimeFailure
		want RuntimeFailure
	}{
		{RuntimeFailure{Check: "/etc/passwd", Code: "not a code", Cause: &codes.Cause{Kind: "EXIT", Detail: "x"}},
			RuntimeFailure{Component: "agent", Check: "startup", Code: codes.Unavailable}},
		{RuntimeFailure{Component: "gateway", Check: "state-migration", Code: codes.Unavailable,
			Cause: &codes.Cause{Kind: codes.CauseWrapperError, Detail: "raw provider text here"}},
			RuntimeFailure{Component: "gateway", Check: "state-migration", Code: codes.Unavailable,
				Cause: &codes.Cause{Kind: codes.CauseWrapperError}}},
	} {
		s := New(Options{Component: "agent", Clock: func() time.Time { return time.Unix(0, 0) }})
		s.Hold(tc.in)
		got, ok := s.Held()
		require.True(t, ok)
		tc.want.CheckedAt = time.Unix(0, 0).UTC()
		require.Equal(t, tc.want, got)
	}
}

func TestRemoteStatusBearer(t *testing.T) {
	s, base := newTestServer(t, nil)
	url := base + PathRemoteStatus
	for _, tc := range []struct {
		name string
		auth string
		code int
	}{
		{"missing", "", 401},
		{"wrong", "Bearer " + strings.Repeat("0", 64), 401},
		{"other revision", "Bearer " + tokenRev2, 401},
		{"not bearer", "Basic " + tokenRev1, 401},
		{"raw token", tokenRev1, 401},
		{"prefix of token", "Bearer " + tokenRev1[:32], 401},
		{"correct", "Bearer " + tokenRev1, 503}, // authenticated, nothing published yet
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr := map[string]string{}
			if tc.auth != "" {
				hdr["Authorization"] = tc.auth
			}
			a := get(t, url, hdr)
			require.Equal(t, tc.code, a.code)
			require.Equal(t, "no-store", a.cache)
			if tc.code == 401 {
				require.Equal(t, "unauthorized\n", a.body) // no detail
			}
		})
	}
	// Two Authorization headers are refused even if one is right.
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Add("Authorization", "Bearer "+tokenRev1)
	req.Header.Add("Authorization", "Bearer "+tokenRev1)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 401, resp.StatusCode)

	ctx := context.Background()
	_, err = FetchRemote(ctx, url, tokenRev1)
	require.ErrorIs(t, err, ErrNotPublished)
	_, err = FetchRemote(ctx, url, tokenRev2)
	require.ErrorIs(t, err, ErrUnauthorized)

	want := PluginStatus{StartupID: "s-1", PodUID: "uid-1", SuccessfulPluginIDs: []string{"github"},
		Failures: []PluginFailure{{PluginID: "gmail", Code: codes.PluginAuthRequired}}, Phase: PluginPhaseReady}
	s.SetPluginStatus(want)
	want.SuccessfulPluginIDs[0] = "mutated" // the server keeps its own copy
	got, err := FetchRemote(ctx, url, tokenRev1)
	require.NoError(t, err)
	require.Equal(t, "github", got.SuccessfulPluginIDs[0])
	got2, err := FetchRemote(ctx, base, tokenRev1) // base URL: the route is appended
	require.NoError(t, err)
	require.Equal(t, got, got2)
	got3, err := FetchRemote(ctx, base+"/", tokenRev1)
	require.NoError(t, err)
	require.True(t, got.SameIdentity(got3))
}

func TestRemoteStatusWithoutKeyRefusesAll(t *testing.T) {
	_, base := newTestServer(t, func(o *Options) { o.RemoteStatusKey = nil })
	for _, auth := range []string{"", "Bearer ", "Bearer " + tokenRev1, "Bearer " + RemoteStatusToken(nil, testRevision)} {
		require.Equal(t, 401, get(t, base+PathRemoteStatus, map[string]string{"Authorization": auth}).code, auth)
	}
}

func TestLocalRoutesAuth(t *testing.T) {
	s := New(Options{Component: "agent", RevisionID: testRevision, RemoteStatusKey: testKey})
	h := s.Handler()
	call := func(path, remote, auth string) int {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.RemoteAddr = remote
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for _, p := range []string{PathStatus, PathRuntimeStatus, PathDiagnostics, PathRuntimeDiagnostics, PathPluginStatus} {
		require.Equal(t, 200, orNotPublished(call(p, "127.0.0.1:5000", "")), p)
		require.Equal(t, 200, orNotPublished(call(p, "[::1]:5000", "")), p)
		require.Equal(t, 401, call(p, "10.1.2.3:5000", ""), p)
		require.Equal(t, 200, orNotPublished(call(p, "10.1.2.3:5000", "Bearer "+tokenRev1)), p)
	}
	// Probe routes are open to kubelet on the pod IP.
	require.Equal(t, 200, call(PathLivez, "10.1.2.3:5000", ""))
	require.Equal(t, 503, call(PathReadyz, "10.1.2.3:5000", ""))
	require.Equal(t, 401, call(PathRemoteStatus, "127.0.0.1:5000", "")) // bearer even locally

	// Extra routes.
	hit := func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }
	require.NoError(t, s.HandleFunc("POST /openclaw/setup-code", hit, AuthLoopback))
	require.NoError(t, s.HandleFunc("GET /x/token", hit, AuthToken))
	require.NoError(t, s.HandleFunc("GET /x/open", hit, AuthNone))
	require.Error(t, s.HandleFunc("POST /openclaw/setup-code", hit, AuthNone), "duplicate")
	require.Error(t, s.HandleFunc("BAD PATTERN WITH SPACES", hit, AuthNone))
	post := func(remote string) int {
		r := httptest.NewRequest(http.MethodPost, "/openclaw/setup-code", nil)
		r.RemoteAddr = remote
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	require.Equal(t, 204, post("127.0.0.1:1"))
	require.Equal(t, 401, post("10.0.0.1:1"))
	require.Equal(t, 401, call("/x/token", "127.0.0.1:1", ""))
	require.Equal(t, 204, call("/x/token", "10.0.0.1:1", "Bearer "+tokenRev1))
	require.Equal(t, 204, call("/x/open", "10.0.0.1:1", ""))
	require.Equal(t, 401, call(PathStatus, "garbage", ""))

	open := New(Options{StatusAuth: AuthNone})
	r := httptest.NewRequest(http.MethodGet, PathStatus, nil)
	r.RemoteAddr = "10.1.2.3:5000"
	w := httptest.NewRecorder()
	open.Handler().ServeHTTP(w, r)
	require.Equal(t, 200, w.Code)
}

func orNotPublished(code int) int {
	if code == http.StatusServiceUnavailable {
		return 200
	}
	return code
}

func TestFetchRemoteRejectsBadAnswers(t *testing.T) {
	var body atomic.Value
	var code atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(int(code.Load()))
		_, _ = w.Write([]byte(body.Load().(string)))
	}))
	defer srv.Close()
	ctx := context.Background()
	for _, tc := range []struct {
		code int
		body string
		want error
	}{
		{200, `not json`, ErrInvalidStatus},
		{200, `{"phase":"weird"}`, ErrInvalidStatus},
		{200, `{"phase":"ready","failures":[{"pluginId":"x","code":"lower"}]}`, ErrInvalidStatus},
		{200, `{"phase":"ready","blob":"` + strings.Repeat("a", maxBody) + `"}`, ErrInvalidStatus},
		{500, ``, nil},
	} {
		code.Store(int64(tc.code))
		body.Store(tc.body)
		_, err := FetchRemote(ctx, srv.URL, "t")
		require.Error(t, err)
		if tc.want != nil {
			require.ErrorIs(t, err, tc.want)
		}
	}
	_, err := FetchRemote(ctx, "ftp://x/y", "t")
	require.Error(t, err)
	_, err = FetchRemote(ctx, "http://[::1", "t")
	require.Error(t, err)
}

func TestFetchRemoteDoesNotFollowRedirects(t *testing.T) {
	var leaked atomic.Bool
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			leaked.Store(true)
		}
	}))
	defer other.Close()
	srv := httptest.NewServer(http.RedirectHandler(other.URL+PathRemoteStatus, http.StatusFound))
	defer srv.Close()
	_, err := FetchRemote(context.Background(), srv.URL, tokenRev1)
	require.Error(t, err)
	require.False(t, leaked.Load())
}

func TestReadyCheckFailures(t *testing.T) {
	// Nothing listening.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	ok, reason, err := ReadyCheck(context.Background(), addr)
	require.False(t, ok)
	require.Equal(t, NotReadyReason, reason)
	require.Error(t, err)

	var mode atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch mode.Load() {
		case 0:
			w.WriteHeader(503)
			fmt.Fprint(w, "something else\x1b[31m\nsecond line")
		case 1:
			w.WriteHeader(500)
		case 2:
			w.WriteHeader(503)
			fmt.Fprint(w, NotReadyReason+"; startup check x failed with Y\x00\x1b\n")
		default:
			<-r.Context().Done()
		}
	}))
	defer srv.Close()
	ok, reason, err = ReadyCheck(context.Background(), srv.URL)
	require.False(t, ok)
	require.NoError(t, err)
	require.Equal(t, NotReadyReason, reason) // a foreign body is not echoed
	mode.Store(1)
	ok, reason, err = ReadyCheck(context.Background(), srv.URL)
	require.False(t, ok)
	require.Error(t, err)
	require.Equal(t, NotReadyReason, reason)
	mode.Store(2)
	_, reason, err = ReadyCheck(context.Background(), srv.URL)
	require.NoError(t, err)
	require.Equal(t, NotReadyReason+"; startup check x failed with Y", reason)
	mode.Store(3)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	ok, reason, err = ReadyCheck(ctx, srv.URL)
	require.False(t, ok)
	require.Error(t, err)
	require.Equal(t, NotReadyReason, reason)
}

func TestServeStopsOnContext(t *testing.T) {
	s := New(Options{Addr: "127.0.0.1:0"})
	ln, err := s.Listen(context.Background())
	require.NoError(t, err)
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	require.Equal(t, 200, get(t, "http://"+addr+PathLivez, nil).code)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(ShutdownTimeout + time.Second):
		t.Fatal("Serve did not return after cancel")
	}
	_, err = net.Dial("tcp", addr)
	require.Error(t, err, "listener still open")

	// ListenAndServe reports a busy address.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	err = New(Options{Addr: busy.Addr().String()}).ListenAndServe(context.Background())
	require.Error(t, err)
}

func TestDefaults(t *testing.T) {
	require.Equal(t, 18791, DefaultPort)
	require.Equal(t, fmt.Sprintf(":%d", DefaultPort), DefaultAddr)
	require.Equal(t, ":18791", New(Options{}).opts.Addr)
	require.Equal(t, 2*time.Second, ReadyTimeout)
}

func TestPluginStatusIdentity(t *testing.T) {
	a := PluginStatus{StartupID: "s", PodUID: "p", SuccessfulPluginIDs: []string{"a"}, Phase: PluginPhaseReady}
	b := a
	b.Phase = PluginPhasePending
	require.True(t, a.SameIdentity(b))
	for _, mut := range []func(*PluginStatus){
		func(p *PluginStatus) { p.StartupID = "s2" },
		func(p *PluginStatus) { p.PodUID = "p2" },
		func(p *PluginStatus) { p.SuccessfulPluginIDs = []string{"b"} },
		func(p *PluginStatus) { p.Failures = []PluginFailure{{PluginID: "x", Code: codes.PluginNotReady}} },
	} {
		c := a
		mut(&c)
		require.False(t, a.SameIdentity(c))
	}
	require.NoError(t, a.Validate())
	require.ErrorIs(t, PluginStatus{}.Validate(), ErrInvalidStatus)
}

func TestConcurrentPollsAndUpdates(t *testing.T) {
	s, base := newTestServer(t, nil)
	s.SetReadyCheck(func(context.Context) error { return nil })
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 500 {
				s.SetReady(n%2 == 0)
				_ = s.SetStatus("phase", map[string]int{"n": n, "w": i})
				s.SetPluginStatus(PluginStatus{StartupID: fmt.Sprint(n), Phase: PluginPhasePending})
				s.SetStarted()
			}
		}()
	}
	var polls sync.WaitGroup
	for range 4 {
		polls.Add(1)
		go func() {
			defer polls.Done()
			for range 25 {
				for _, p := range []string{PathReadyz, PathStatus, PathDiagnostics, PathPluginStatus} {
					a := get(t, base+p, nil)
					require.Contains(t, []int{200, 503}, a.code)
				}
			}
		}()
	}
	s.Hold(RuntimeFailure{Check: "plugin-install", Code: codes.PluginNotReady})
	polls.Wait()
	wg.Wait()
	ok, reason, err := ReadyCheck(context.Background(), base)
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, NotReadyReason+"; startup check plugin-install failed with PLUGIN_NOT_READY", reason)
}

// BenchmarkStatusServerStart measures New → listening → first /livez served.
func BenchmarkStatusServerStart(b *testing.B) {
	var listen, first time.Duration
	for b.Loop() {
		st, err := MeasureStart(context.Background(), Options{Component: "gateway"})
		if err != nil {
			b.Fatal(err)
		}
		listen += st.Listening
		first += st.FirstLivez
	}
	b.ReportMetric(float64(listen.Microseconds())/float64(b.N), "us-to-listen")
	b.ReportMetric(float64(first.Microseconds())/float64(b.N), "us-to-first-livez")
}

// BenchmarkReadyzPoll measures one readiness poll over loopback.
func BenchmarkReadyzPoll(b *testing.B) {
	s := New(Options{})
	s.SetReady(true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	defer func() { cancel(); <-done }()
	addr := ln.Addr().String()
	for b.Loop() {
		if ok, _, err := ReadyCheck(context.Background(), addr); !ok || err != nil {
			b.Fatal("not ready", err)
		}
	}
}

func TestRemoteErrorReason(t *testing.T) {
	require.Equal(t, "", RemoteErrorReason(nil))
	require.Equal(t, "unauthorized", RemoteErrorReason(fmt.Errorf("x: %w", ErrUnauthorized)))
	require.Equal(t, "not-published", RemoteErrorReason(ErrNotPublished))
	require.Equal(t, "invalid-status", RemoteErrorReason(fmt.Errorf("%w: json", ErrInvalidStatus)))
	require.Equal(t, "timeout", RemoteErrorReason(fmt.Errorf("get: %w", context.DeadlineExceeded)))
	require.Equal(t, "unreachable", RemoteErrorReason(errors.New("connection refused")))
	// A real timeout from the client.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := FetchRemote(ctx, srv.URL, "t")
	require.Equal(t, "timeout", RemoteErrorReason(err))
}

func TestFailureOf(t *testing.T) {
	cause := codes.Cause{Kind: codes.CauseProbeStatus, Detail: "rate_limit"}
	err := fmt.Errorf("probe: %w", phase.FailCause(codes.ModelProbeFailed, cause, errors.New("x")))
	require.Equal(t, RuntimeFailure{Check: "model-probe", Code: codes.ModelProbeFailed, Cause: &cause}, FailureOf(err, "model-probe"))
	require.Equal(t, RuntimeFailure{Check: "state-migration", Code: codes.Unavailable},
		FailureOf(phase.FailCheck("state-migration", codes.Unavailable, nil), "plugin-install"))
	require.Equal(t, RuntimeFailure{Check: "codex-login", Code: codes.Unavailable}, FailureOf(errors.New("boom"), "codex-login"))
	require.Equal(t, RuntimeFailure{Check: "x", Code: codes.Unavailable}, FailureOf(nil, "x"))
}

func TestRunReadyProbe(t *testing.T) {
	s, base := newTestServer(t, nil)
	var out bytes.Buffer
	require.Equal(t, 1, RunReadyProbe(context.Background(), base, &out))
	require.Equal(t, NotReadyReason+"\n", out.String())
	s.SetReady(true)
	out.Reset()
	require.Equal(t, 0, RunReadyProbe(context.Background(), base, &out))
	require.Empty(t, out.String())
	s.Hold(RuntimeFailure{Check: "codex-login", Code: codes.LoginFailed})
	require.Equal(t, 1, RunReadyProbe(context.Background(), base, &out))
	require.Equal(t, NotReadyReason+"; startup check codex-login failed with LOGIN_FAILED\n", out.String())
}

func TestPhaseObserver(t *testing.T) {
	s, base := newTestServer(t, nil)
	r := phase.New("gateway", time.Now(), nil, nil)
	r.Observe(s.PhaseObserver())
	require.NoError(t, r.Run(context.Background(), "model-probe", func(context.Context) error { return nil }))
	for range maxPhaseRecords + 5 {
		r.Record("gateway-respawn", phase.Failed, time.Second, codes.Unavailable)
	}
	var doc struct {
		Phases []PhaseRecord `json:"startupPhases"`
	}
	require.NoError(t, json.Unmarshal([]byte(get(t, base+PathStatus, nil).body), &doc))
	require.Len(t, doc.Phases, maxPhaseRecords)
	last := doc.Phases[len(doc.Phases)-1]
	require.Equal(t, "gateway-respawn", last.Phase)
	require.Equal(t, "UNAVAILABLE", last.Code)
	require.EqualValues(t, 1000, last.Ms)
}

// TestParseHeldReason reads a held reason back from a probe's output as
// kubelet reports it, and refuses anything else.
func TestParseHeldReason(t *testing.T) {
	r := HeldReason(RuntimeFailure{Check: "model-probe", Code: codes.AuthenticationFailed})
	for _, tc := range []struct {
		in    string
		check string
		code  codes.Code
		ok    bool
	}{
		{r, "model-probe", codes.AuthenticationFailed, true},
		{"Readiness probe failed: " + r + "\n", "model-probe", codes.AuthenticationFailed, true},
		{"Readiness probe failed: " + NotReadyReason + "\n", "", "", false},
		{NotReadyReason + "; startup check model-probe failed with NOT_A_CODE", "", "", false},
		{"startup check model-probe failed with AUTHENTICATION_FAILED", "", "", false},
		{"", "", "", false},
	} {
		check, code, ok := ParseHeldReason(tc.in)
		require.Equal(t, tc.ok, ok, tc.in)
		require.Equal(t, tc.check, check, tc.in)
		require.Equal(t, tc.code, code, tc.in)
	}
}
