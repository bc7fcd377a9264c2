package nodehost

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"oce.dev/oce/shared/ocproto"
)

// scriptedRequester hands each request's method to the test and answers
// with the error the test sends back.
type scriptedRequester struct {
	methods chan string
	answers chan error
}

func (s scriptedRequester) Request(ctx context.Context, method string, _ any, _ any) error {
	select {
	case s.methods <- method:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-s.answers:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func TestSessionStale(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		stale bool
	}{
		{"answered", nil, false},
		{"timed out", context.DeadlineExceeded, false},
		{"connection closed", ocproto.ErrClosed, false},
		{"not a worker host", &ocproto.Error{Code: "INVALID_REQUEST", Message: "unknown nodeId"}, false},
		{"first pairing awaiting approval", &ocproto.Error{Code: "UNAVAILABLE",
			Message: "node capability surface is awaiting operator approval; run `openclaw nodes approve r1`"}, false},
		{"store busy", &ocproto.Error{Code: "UNAVAILABLE", Message: "node runner inventory persistence failed; retry"}, false},
		{"generation moved on", &ocproto.Error{Code: "UNAVAILABLE", Message: "node runner inventory publication lost its pairing ownership; retry"}, true},
		{"not current", &ocproto.Error{Code: "UNAVAILABLE", Message: "node runner inventory publication is not current; retry after pairing completes"}, true},
		{"pairing changed", &ocproto.Error{Code: "INVALID_REQUEST", Message: "x", DetailsCode: "PAIRING_CHANGED"}, true},
		{"wrapped", fmt.Errorf("publish: %w", &ocproto.Error{Code: "UNAVAILABLE", Message: "node pairing changed before request dispatch"}), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.stale, sessionStale(tc.err))
		})
	}
}

// The watch keeps checking through answers that do not say the session is
// stale and through one stale answer the next check contradicts; it
// reconnects once, and stops, on two stale answers in a row.
func TestWatchPairingReconnectsOnlyWhenStale(t *testing.T) {
	h, _ := newTestHost(t, false)
	req := scriptedRequester{methods: make(chan string), answers: make(chan error)}
	kick := make(chan struct{})
	reconnects := make(chan struct{}, 2)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// an hour: only kicks and the confirmation timer trigger checks
		pairingWatch{interval: time.Hour, confirm: time.Millisecond, kick: kick,
			reconnect: func() { reconnects <- struct{}{} }}.run(context.Background(), h, req)
	}()
	stale := &ocproto.Error{Code: "UNAVAILABLE", Message: "node runner inventory publication lost its pairing ownership; retry"}
	for _, step := range []struct {
		kick   bool
		answer error
	}{
		{true, nil},
		{true, context.DeadlineExceeded},
		{true, &ocproto.Error{Code: "UNAVAILABLE", Message: "node capability surface is awaiting operator approval"}},
		{true, stale},
		{false, nil}, // the confirmation says current: keep the session
		{true, stale},
		{false, stale},
	} {
		if step.kick {
			kick <- struct{}{}
		}
		require.Equal(t, "node.runnerInventory.update", <-req.methods)
		req.answers <- step.answer
	}
	<-done
	require.Len(t, reconnects, 1)
	_, checks := h.pairingCounts()
	require.Equal(t, 7, checks)
}

// Without kicks, the interval drives the checks; ending ctx ends the watch
// without a reconnect.
func TestWatchPairingChecksEveryInterval(t *testing.T) {
	h, _ := newTestHost(t, false)
	req := scriptedRequester{methods: make(chan string), answers: make(chan error)}
	ctx, cancel := context.WithCancel(context.Background())
	reconnected := false
	done := make(chan struct{})
	go func() {
		defer close(done)
		pairingWatch{interval: time.Millisecond, confirm: time.Hour, reconnect: func() { reconnected = true }}.run(ctx, h, req)
	}()
	for range 3 {
		<-req.methods
		req.answers <- nil
	}
	cancel()
	<-done
	require.False(t, reconnected)
}
