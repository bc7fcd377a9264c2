package imagestest

import (
	"context"
	"testing"
	"time"
)

// BenchmarkImagesBuild measures `make images` when nothing changed (the
// first call builds whatever is missing and is not timed) and reports the
// archive sizes. docs/PERFORMANCE.md records it with the cold build.
func BenchmarkImagesBuild(b *testing.B) {
	ctx := context.Background()
	start := time.Now()
	imgs, err := build(ctx)
	if err != nil {
		b.Fatal(err)
	}
	first := time.Since(start)
	b.ResetTimer()
	for b.Loop() {
		if _, err := build(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(first.Seconds(), "first-s")
	for name, img := range imgs {
		b.ReportMetric(float64(img.Bytes)/(1<<20), name+"-archive-MiB")
	}
}
