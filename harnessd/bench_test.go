package harnessd

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rssKB reads VmRSS of pid.
func rssKB(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			n, _ := strconv.Atoi(strings.Fields(l)[1])
			return n
		}
	}
	return -1
}

func phaseMs(recs []map[string]any, name, field string) float64 {
	for _, r := range recs {
		if r["phase"] == name {
			v, _ := r[field].(float64)
			return v
		}
	}
	return -1
}

// BenchmarkStartToReady starts harnessd under tini against the real Codex
// and the fake provider, once per iteration, and reports:
//   - overhead-ms: ready-marker's sinceStartMs minus the phases harnessd
//     waits for (codex-login, model-probe, native-spawn), from the records;
//   - exec-overhead-ms: the same measured from the test's exec of tini to
//     the ready-marker record's timestamp (adds tini, exec, Go runtime init);
//   - start-to-ready-ms: exec of tini to the ready-marker record;
//   - rss-KB: harnessd's VmRSS while the app-server idles (max of 10
//     samples over one second after ready);
//   - <phase>-ms: the Codex Harness's boot budget per phase (issue 23):
//     codex login, the model probe (a real Codex turn), and the
//     app-server's start until it listens.
func BenchmarkStartToReady(b *testing.B) {
	var overhead, execOverhead, total, rss float64
	phases := map[string]float64{} // the boot budget per phase (issue 23)
	for i := 0; i < b.N; i++ {
		fp := startFake(b, plantedKey)
		start := time.Now()
		h := startHD(b, hdOpts{mode: LoginAPIKey, key: plantedKey, keyFile: true, baseURL: fp.URL() + "/v1"})
		h.waitReady()
		pid := h.harnessdPid()
		recs := h.log.phases()
		waited := phaseMs(recs, PhaseCodexLogin, "ms") + phaseMs(recs, PhaseModelProbe, "ms") + phaseMs(recs, PhaseNativeSpawn, "ms")
		for _, ph := range []string{PhaseCodexLogin, PhaseModelProbe, PhaseNativeSpawn} {
			phases[ph] += phaseMs(recs, ph, "ms")
		}
		overhead += phaseMs(recs, PhaseReadyMarker, "sinceStartMs") - waited
		for _, r := range recs {
			if r["phase"] == PhaseReadyMarker {
				ts, _ := time.Parse(time.RFC3339Nano, r["time"].(string))
				ms := float64(ts.Sub(start).Microseconds()) / 1000
				total += ms
				execOverhead += ms - waited
			}
		}
		tick := time.NewTicker(100 * time.Millisecond)
		max := 0
		for j := 0; j < 10; j++ {
			<-tick.C
			if v := rssKB(pid); v > max {
				max = v
			}
		}
		tick.Stop()
		rss += float64(max)
		h.stop()
	}
	n := float64(b.N)
	b.ReportMetric(overhead/n, "overhead-ms")
	b.ReportMetric(execOverhead/n, "exec-overhead-ms")
	b.ReportMetric(total/n, "start-to-ready-ms")
	b.ReportMetric(rss/n, "rss-KB")
	for ph, ms := range phases {
		// codex login, the Codex model probe, and the app-server's spawn
		// until it listens
		b.ReportMetric(ms/n, ph+"-ms")
	}
}
