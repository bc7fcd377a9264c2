package logging

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestThrottle(t *testing.T) {
	now := time.Unix(1000, 0)
	th := NewThrottle(30*time.Second, func() time.Time { return now })
	require.True(t, th.Allow())
	require.False(t, th.Allow())
	now = now.Add(29 * time.Second)
	require.False(t, th.Allow())
	now = now.Add(time.Second)
	require.True(t, th.Allow())
	require.False(t, th.Allow())
	th.Reset()
	require.True(t, th.Allow())
	require.True(t, NewThrottle(time.Hour, nil).Allow())
}
