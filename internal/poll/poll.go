// Package poll waits in a test for a condition that has no event to wait
// on (a file, an endpoint without a blocking form, an observation),
// checking it in the test's own goroutine.
//
// testify's Eventually runs its condition in a goroutine of its own: a
// condition that fails the test there (a require inside it) ends only that
// goroutine, so the wait runs to its timeout and reports "condition never
// satisfied" instead of the failure, and a later tick may fail after the
// test ended — which panics the whole test binary. Until has no such
// goroutine: a failing condition stops the test at once with its own
// message.
package poll

import (
	"fmt"
	"testing"
	"time"
)

// Until checks cond every tick until it holds, failing the test with
// msgAndArgs (a format and its arguments, like testify's) once waitFor has
// passed. cond is checked at once, then after each tick, in the caller's
// goroutine: it may itself fail the test.
func Until(t testing.TB, cond func() bool, waitFor, tick time.Duration, msgAndArgs ...any) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if !time.Now().Before(deadline) {
			t.Fatalf("condition not met within %s%s", waitFor, message(msgAndArgs))
		}
		time.Sleep(tick) // the caller has no event to wait on
	}
}

func message(msgAndArgs []any) string {
	if len(msgAndArgs) == 0 {
		return ""
	}
	if f, ok := msgAndArgs[0].(string); ok {
		return ": " + fmt.Sprintf(f, msgAndArgs[1:]...)
	}
	return ": " + fmt.Sprint(msgAndArgs...)
}
