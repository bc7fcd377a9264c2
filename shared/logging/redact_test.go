package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRedactorScrub(t *testing.T) {
	r := NewRedactor("hunter2-secret", "abc")
	for _, tc := range []struct{ in, want string }{
		{"plain text stays", "plain text stays"},
		{"password is hunter2-secret!", "password is [REDACTED]!"},
		{"Incorrect API key provided: sk-proj-abcdefghijklmnop.", "Incorrect API key provided: [REDACTED]."},
		{"key sk-ant-api03-XYZ_123 rejected", "key [REDACTED] rejected"},
		{"Authorization: Bearer eyJhbGciOi.payload.sig", "Authorization: Bearer [REDACTED]"},
		{"bearer abcd1234", "bearer [REDACTED]"},
		{"token at-0123456789abcdef0123 here", "token [REDACTED] here"},
		{"jwt eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ1c2VyIn0.c2lnbmF0dXJl end", "jwt [REDACTED] end"},
		{"look at-risk", "look at-risk"},            // too short for an access token
		{"task-abc", "task-abc"},                    // "abc" is below MinSecretLen and not registered
		{"\x1b[31mERROR\x1b[0m boom", "ERROR boom"}, // colour escapes removed
	} {
		require.Equal(t, tc.want, r.Scrub(tc.in), tc.in)
	}
}

func TestRedactorAdd(t *testing.T) {
	r := &Redactor{}
	require.False(t, r.Add(""))
	require.False(t, r.Add("abc"))
	require.True(t, r.Add("abcd"))
	require.True(t, r.Add("abcd")) // idempotent
	require.True(t, r.Add("xxabcdxx"))
	// The longer secret is replaced whole, not left as xx[REDACTED]xx.
	require.Equal(t, "[REDACTED] and [REDACTED]", r.Scrub("xxabcdxx and abcd"))
	var nilR *Redactor
	require.False(t, nilR.Add("abcdef"))
	require.Equal(t, "sk [REDACTED]", nilR.Scrub("sk sk-abcdefghij"))
}

func TestRedactorConcurrent(t *testing.T) {
	r := &Redactor{}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := strings.Repeat(string(rune('a'+i)), 8)
			r.Add(s)
			require.Equal(t, Redacted, r.Scrub(s))
		}()
	}
	wg.Wait()
}

func TestSensitiveKey(t *testing.T) {
	for k, want := range map[string]bool{
		"apiKey": true, "OPENAI_API_KEY": true, "accessToken": true, "Authorization": true,
		"client_secret": true, "password": true, "credentials": true, "Cookie": true,
		"phase": false, "container": false, "code": false, "line": false, "stream": false,
	} {
		require.Equal(t, want, SensitiveKey(k), k)
	}
}

type stringer struct{}

func (stringer) String() string { return "via stringer sk-abcdefghijkl" }

type withSecret struct {
	Name   string            `json:"name"`
	APIKey string            `json:"apiKey"`
	Nested map[string]string `json:"nested"`
	Count  int               `json:"maxTokens"`
}

func decodeLines(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal(l, &m), string(l))
		out = append(out, m)
	}
	return out
}

func TestHandlerRedacts(t *testing.T) {
	var buf bytes.Buffer
	red := NewRedactor("s3cr3t-value")
	l := slog.New(NewRedactingHandler(slog.NewJSONHandler(&buf, nil), red)).
		With("authorization", "Bearer xyz", "component", "gatewayd")
	l.Info("login with s3cr3t-value failed",
		"apiKey", "anything",
		"maxTokens", 256,
		"detail", "upstream said s3cr3t-value",
		"err", errors.New("401: sk-abcdefghijklmnop"),
		"str", stringer{},
		"obj", withSecret{Name: "n s3cr3t-value", APIKey: "k", Nested: map[string]string{"token": "t", "ok": "fine"}, Count: 7},
		"raw", []byte("sk-ant-abcdef"),
		slog.Group("g", slog.String("password", "p"), slog.String("x", "sk-abcdefghijk")),
	)
	out := buf.String()
	for _, leak := range []string{"s3cr3t-value", "xyz", "anything", "sk-abcdefghijklmnop", "sk-ant-abcdef", "\"k\"", "\"t\"", "\"p\""} {
		require.NotContains(t, out, leak)
	}
	recs := decodeLines(t, buf.Bytes())
	require.Len(t, recs, 1)
	r := recs[0]
	require.Equal(t, "login with [REDACTED] failed", r["msg"])
	require.Equal(t, Redacted, r["authorization"])
	require.Equal(t, "gatewayd", r["component"])
	require.Equal(t, Redacted, r["apiKey"])
	require.EqualValues(t, 256, r["maxTokens"])
	require.Equal(t, "401: [REDACTED]", r["err"])
	require.Equal(t, "via stringer [REDACTED]", r["str"])
	obj := r["obj"].(map[string]any)
	require.Equal(t, "n [REDACTED]", obj["name"])
	require.Equal(t, Redacted, obj["apiKey"])
	require.EqualValues(t, 7, obj["maxTokens"])
	require.Equal(t, map[string]any{"token": Redacted, "ok": "fine"}, obj["nested"])
	require.Equal(t, map[string]any{"password": Redacted, "x": Redacted}, r["g"])
}

type panicky struct{}

func (panicky) MarshalJSON() ([]byte, error) { panic("boom") }

type cyclic struct{ Self *cyclic }

func TestHandlerNeverPanics(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(NewRedactingHandler(slog.NewJSONHandler(&buf, nil), nil))
	c := &cyclic{}
	c.Self = c
	require.NotPanics(t, func() {
		l.Info("a", "p", panicky{})
		l.Info("b", "c", c)
		l.With("p", panicky{}).Info("c")
		l.Info("d", "ch", make(chan int))
	})
	recs := decodeLines(t, buf.Bytes())
	require.Len(t, recs, 4)
}

func TestNewWritesJSONLines(t *testing.T) {
	var buf bytes.Buffer
	l := New(&buf, slog.LevelInfo, "harnessd")
	l.Debug("hidden")
	l.Info("shown", "n", 1)
	l.Error("bad")
	recs := decodeLines(t, buf.Bytes())
	require.Len(t, recs, 2)
	for _, r := range recs {
		require.Contains(t, r, "time")
		require.Contains(t, r, "level")
		require.Contains(t, r, "msg")
		require.Equal(t, "harnessd", r["component"])
	}
	require.Equal(t, "ERROR", recs[1]["level"])
}

func TestPackageScrub(t *testing.T) {
	var buf bytes.Buffer
	l := New(&buf, slog.LevelInfo, "x")
	require.True(t, Scrub("package-level-secret-42"))
	l.Info("value package-level-secret-42 seen")
	require.NotContains(t, buf.String(), "package-level-secret-42")
	require.Contains(t, buf.String(), Redacted)
	require.True(t, DefaultRedactor().Contains("package-level-secret-42"))
}

func TestLooksLikeSecret(t *testing.T) {
	for v, want := range map[string]bool{
		"sk-x": true, "sk-ant-oat01-abc": true, "at-1": true, "Bearer abc": true, "bearer abc": true,
		"sk-": false, "Bearer ": false, "sk- spaced out": false, "ask-me": false, "gateway": false, "": false,
	} {
		require.Equal(t, want, LooksLikeSecret(v), v)
	}
	var buf bytes.Buffer
	l := NewWithOptions(&buf, Options{Component: "c", OmitTime: true, Redactor: NewRedactor()})
	l.Info("m", "value", "sk-x", "other", "at-abc", "fine", "ok")
	require.Equal(t, `{"level":"INFO","msg":"m","component":"c","value":"[REDACTED]","other":"[REDACTED]","fine":"ok"}`+"\n", buf.String())
}

// FuzzScrub checks the fast pre-check never hides a pattern match and that
// a registered secret never survives Scrub.
func FuzzScrub(f *testing.F) {
	f.Add("Authorization: BeArEr abcdef")
	f.Add("key sk-ant-abcd and at-0123456789abcdef0123")
	f.Add("bbbbearer xyzw")
	f.Fuzz(func(t *testing.T, s string) {
		if secretPattern.MatchString(s) && !maySecret(s) {
			t.Fatalf("pre-check missed a secret in %q", s)
		}
		r := NewRedactor("SECRET-VALUE")
		if strings.Contains(r.Scrub(s+"SECRET-VALUE"+s), "SECRET-VALUE") {
			t.Fatalf("registered secret survived in %q", s)
		}
	})
}
