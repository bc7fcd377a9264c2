package backoff

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDelay(t *testing.T) {
	p := Policy{Base: time.Second, Max: 30 * time.Second}
	for _, tc := range []struct {
		attempt int
		want    time.Duration
	}{
		{-1, time.Second}, {0, time.Second}, {1, 2 * time.Second}, {4, 16 * time.Second},
		{5, 30 * time.Second}, {60, 30 * time.Second}, {1 << 20, 30 * time.Second},
	} {
		require.Equal(t, tc.want, p.Delay(tc.attempt), "attempt %d", tc.attempt)
	}
	require.Equal(t, time.Second, Policy{Base: time.Second, Max: time.Millisecond}.Delay(3), "Max below Base is Base")
	huge := Policy{Base: time.Hour, Max: time.Duration(1<<63 - 1)}
	require.Positive(t, huge.Delay(100), "no overflow")
}

func TestSequence(t *testing.T) {
	s := Sequence{Policy: Policy{Base: time.Second, Max: 30 * time.Second}}
	var got []time.Duration
	for range 7 {
		got = append(got, s.Next())
	}
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second,
		16 * time.Second, 30 * time.Second, 30 * time.Second}, got)
	s.Reset()
	require.Equal(t, time.Second, s.Next())
}

func TestJittered(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		d := Jittered(10*time.Second, r.Int64N)
		require.GreaterOrEqual(t, d, 5*time.Second)
		require.LessOrEqual(t, d, 10*time.Second)
	}
	require.Equal(t, time.Duration(1), Jittered(1, r.Int64N))
	require.Equal(t, time.Duration(0), Jittered(0, r.Int64N))
}
