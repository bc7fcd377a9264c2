package ratelimit

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type clock struct{ at time.Time }

func (c *clock) now() time.Time { return c.at }

func TestTakeRefillsAtRate(t *testing.T) {
	c := &clock{at: time.Unix(1000, 0)}
	s := New(2, 3, c.now)
	for range 3 {
		ok, _ := s.Take("a")
		require.True(t, ok)
	}
	ok, wait := s.Take("a")
	require.False(t, ok)
	require.Equal(t, 500*time.Millisecond, wait)
	locked, _ := s.Empty("a")
	require.True(t, locked)
	ok, _ = s.Take("b")
	require.True(t, ok, "keys are independent")
	c.at = c.at.Add(time.Second)
	locked, _ = s.Empty("a")
	require.False(t, locked)
	for range 2 {
		ok, _ = s.Take("a")
		require.True(t, ok)
	}
	ok, _ = s.Take("a")
	require.False(t, ok, "two tokens a second")
	require.True(t, New(-1, 0, c.now).Off())
	ok, _ = New(-1, 0, c.now).Take("a")
	require.True(t, ok, "off admits everything")
}

func TestAdmitFoldsRefusals(t *testing.T) {
	c := &clock{at: time.Unix(1000, 0)}
	s := New(1, 2, c.now)
	for _, want := range []bool{true, true, false, false, false} {
		ok, n := s.Admit("a")
		require.Equal(t, want, ok)
		require.Zero(t, n)
	}
	c.at = c.at.Add(time.Second)
	ok, n := s.Admit("a")
	require.True(t, ok)
	require.Equal(t, 3, n, "the admitted call stands for the three folded")
}

func TestRefusalOncePerWindow(t *testing.T) {
	c := &clock{at: time.Unix(1000, 0)}
	s := New(1, 1, c.now)
	first, n := s.Refusal("a", time.Minute)
	require.True(t, first)
	require.Equal(t, 1, n)
	for range 5 {
		first, _ = s.Refusal("a", time.Minute)
		require.False(t, first)
	}
	c.at = c.at.Add(time.Minute)
	first, n = s.Refusal("a", time.Minute)
	require.True(t, first)
	require.Equal(t, 6, n)
}

// TestKeysBounded: a flood of distinct keys never grows the set past
// MaxKeys; full buckets are forgotten, and when every key holds state new
// keys share one bucket.
func TestKeysBounded(t *testing.T) {
	c := &clock{at: time.Unix(1000, 0)}
	s := New(1, 1, c.now)
	for i := range 3 * MaxKeys {
		s.Take(fmt.Sprint(i)) // each key spends its only token: all hold state
	}
	require.LessOrEqual(t, s.Len(), MaxKeys+1)
	ok, _ := s.Take("fresh")
	require.False(t, ok, "new keys share the spent overflow bucket")
	c.at = c.at.Add(time.Hour)
	s.Take("after")
	require.LessOrEqual(t, s.Len(), 2, "refilled buckets are forgotten")
}

func TestSourceKey(t *testing.T) {
	require.Equal(t, "192.0.2.7", SourceKey("192.0.2.7:4312"))
	require.Equal(t, "2001:db8:1:2::/64", SourceKey("[2001:db8:1:2:aaaa::1]:443"))
	require.Equal(t, SourceKey("[2001:db8:1:2::5]:1"), SourceKey("[2001:db8:1:2:ffff::9]:2"), "one /64, one key")
	require.Equal(t, "local", SourceKey("@"))
	require.Equal(t, "local", SourceKey(""))
}
