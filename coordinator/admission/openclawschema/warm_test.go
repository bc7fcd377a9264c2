package openclawschema

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWarm: Warm compiles the schema once, for every later Validate.
func TestWarm(t *testing.T) {
	require.NoError(t, Warm())
	s, err := load()
	require.NoError(t, err)
	require.NotNil(t, s)
	require.NoError(t, Warm())
	again, _ := load()
	require.Same(t, s, again, "compiled once")
	require.NoError(t, Validate([]byte(`{"gateway":{"mode":"local"}}`)))
}

// BenchmarkCompile is what the first Configuration save would pay without
// the coordinator's warm-up; BenchmarkValidateWarm what every save pays.
func BenchmarkCompile(b *testing.B) {
	start := time.Now()
	for range b.N {
		_, err := compile()
		require.NoError(b, err)
	}
	b.ReportMetric(time.Since(start).Seconds()/float64(b.N), "s-compile")
}

func BenchmarkValidateWarm(b *testing.B) {
	require.NoError(b, Warm())
	doc := []byte(`{"agents":{"defaults":{"model":{"primary":"openai/gpt-5.5"}}},"gateway":{"mode":"local"}}`)
	b.ResetTimer()
	for range b.N {
		require.NoError(b, Validate(doc))
	}
}
