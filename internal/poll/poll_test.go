package poll

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// recorder is a testing.TB that records a fatal failure and ends the
// goroutine as the testing package does.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	panic(r)
}

// run runs f with a recorder and answers the failure it recorded ("" when
// none).
func run(t *testing.T, f func(tb testing.TB)) string {
	t.Helper()
	r := &recorder{TB: t}
	func() {
		defer func() {
			if p := recover(); p != nil {
				require.Same(t, r, p)
			}
		}()
		f(r)
	}()
	return r.failed
}

func TestUntil(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cond   func(calls int) bool
		failed string
		calls  int
	}{
		{"holds at once: no tick waited", func(int) bool { return true }, "", 1},
		{"holds on the third check", func(n int) bool { return n >= 3 }, "", 3},
		{"never holds: fails after waitFor", func(int) bool { return false }, "condition not met within 50ms: want 3", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			failed := run(t, func(tb testing.TB) {
				Until(tb, func() bool { calls++; return tc.cond(calls) }, 50*time.Millisecond, time.Millisecond, "want %d", 3)
			})
			require.Equal(t, tc.failed, failed)
			if tc.calls >= 0 {
				require.Equal(t, tc.calls, calls)
			} else {
				require.Greater(t, calls, 1, "checked again after each tick")
			}
		})
	}
}

func TestMessage(t *testing.T) {
	require.Equal(t, "", message(nil))
	require.Equal(t, ": want 3", message([]any{"want %d", 3}))
	require.Equal(t, ": plain", message([]any{"plain"}))
	require.Equal(t, ": 7", message([]any{7}))
}
