package fakeprovider

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// BenchmarkResponsesStream measures a full streamed Responses answer over
// loopback HTTP (the fake must never be a test's bottleneck).
func BenchmarkResponsesStream(b *testing.B) {
	s, err := Start(b.Context(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	body := responsesBody("Reply only READY. Do not use tools.", true)
	start := time.Now()
	for b.Loop() {
		resp, err := http.Post(s.URL()+"/v1/responses", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatal(resp.Status)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
}
