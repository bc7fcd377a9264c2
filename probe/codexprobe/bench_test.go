package codexprobe

import (
	"bytes"
	"testing"
	"time"

	"oce.dev/oce/probe/fakeprovider"
	"oce.dev/oce/shared/codes"
)

// BenchmarkRealCodexProbeReady measures one successful probe with the real
// Codex 0.169.0 against the fake provider: process start to READY.
func BenchmarkRealCodexProbeReady(b *testing.B) {
	rig := realSetup(b, goodKey, fakeprovider.Options{})
	var total time.Duration
	for b.Loop() {
		r, err := Run(b.Context(), rig.cfg)
		if err != nil || r.Code != codes.Ready {
			b.Fatalf("probe: %v %v", r.Code, err)
		}
		total += r.Elapsed
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/probe")
}

// BenchmarkClassify measures parsing and classifying a successful attempt's output.
func BenchmarkClassify(b *testing.B) {
	out := []byte(`{"type":"thread.started","thread_id":"x"}
{"type":"turn.started"}
{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"READY"}}
{"type":"turn.completed","usage":{"input_tokens":10}}
`)
	for b.Loop() {
		if v := classify(readEvents(bytes.NewReader(out)), exit{}); v.code != codes.Ready {
			b.Fatal(v.code)
		}
	}
}
