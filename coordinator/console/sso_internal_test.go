package console

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// What unauthenticated /console/sso/start requests may store is bounded:
// MaxPendingSSO live logins, each for PendingSSOTTL.
func TestPendingLoginsBounded(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	p := newPendingLogins(func() time.Time { return now })
	for i := range MaxPendingSSO {
		require.NoError(t, p.add(strconv.Itoa(i), pendingLogin{verifier: "v"}))
	}
	require.ErrorIs(t, p.add("one-too-many", pendingLogin{}), errPendingFull)
	require.Equal(t, MaxPendingSSO, p.len())

	// a full store sweeps the expired ones
	now = now.Add(PendingSSOTTL + time.Second)
	require.NoError(t, p.add("after-expiry", pendingLogin{verifier: "w"}))
	require.Equal(t, 1, p.len())

	// a login is taken once
	l, ok := p.take("after-expiry")
	require.True(t, ok)
	require.Equal(t, "w", l.verifier)
	_, ok = p.take("after-expiry")
	require.False(t, ok)

	// an expired login is not taken
	require.NoError(t, p.add("late", pendingLogin{}))
	now = now.Add(PendingSSOTTL + time.Second)
	_, ok = p.take("late")
	require.False(t, ok)
	require.Zero(t, p.len())
}
