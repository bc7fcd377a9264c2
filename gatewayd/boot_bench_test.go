package gatewayd

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/modelref"
	"oce.dev/oce/shared/netns"
	"oce.dev/oce/shared/runtimes"
)

// traceLine is one phase of the gateway's own startup trace
// (OPENCLAW_GATEWAY_STARTUP_TRACE=1): "[gateway] startup trace: <phase>
// <ms>ms total=<ms>ms …", relayed by gatewayd as a child-output record.
var traceLine = regexp.MustCompile(`startup trace: (\S+) ([0-9.]+)ms total=([0-9.]+)ms`)

// bootRun is one measured gateway boot under gatewayd.
type bootRun struct {
	ready    time.Duration      // gatewayd launch → gatewayd /readyz 200
	prespawn float64            // gatewayd launch → native-spawn record (ms)
	phases   map[string]float64 // trace phase → ms (summed over repeats)
	cache    string             // the compile-cache record's prebuilt state
}

// bootVariant is one way to boot the gateway in BenchmarkGatewayBoot.
type bootVariant struct {
	name     string
	cache    string         // OCE_COMPILE_CACHE ("" = none)
	admitted map[string]any // the admitted document
}

// bootGatewayd boots gatewayd (dedicated OpenClaw: no model probe) under
// tini with the startup trace on, waits until it is ready, stops it and
// returns the measurements.
func bootGatewayd(b *testing.B, paths runtimes.Paths, v bootVariant) bootRun {
	dir := b.TempDir()
	env := gwEnv(b, dir, contract.DedicatedOpenClaw, freePort(b), freePort(b))
	env["OCE_OPENCLAW_BIN"] = strings.Join(paths.OpenClawCommand(), " ")
	env["OPENCLAW_GATEWAY_STARTUP_TRACE"] = "1"
	if v.cache != "" {
		env[contract.EnvCompileCache] = v.cache
	}
	writeJSONFile(b, env["OPENCLAW_CONFIG_PATH"], v.admitted)
	cmd, lg, launch := launchGatewayd(b, env)
	at := pollUntil200("http://"+env["OCE_STATUS_ADDR"]+"/readyz", realReady)
	require.False(b, at.IsZero(), "gatewayd never ready:\n%s", lg.String())
	r := bootRun{ready: at.Sub(launch), phases: map[string]float64{}}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	for _, rec := range lg.records() {
		if s, ok := rec["prebuilt"].(string); ok && rec["msg"] == "compile cache" {
			r.cache = s
		}
		if rec["msg"] == "runtime.startup_phase" && rec["phase"] == PhaseNativeSpawn {
			r.prespawn, _ = rec["sinceStartMs"].(float64)
		}
		line, _ := rec["line"].(string)
		if m := traceLine.FindStringSubmatch(line); m != nil {
			ms, _ := strconv.ParseFloat(m[2], 64)
			r.phases[m[1]] += ms
		}
	}
	require.NotEmpty(b, r.phases, "no startup trace in the gateway's output:\n%s", lg.String())
	return r
}

// metricName makes a trace phase name a benchmark unit (no spaces).
func metricName(s string) string { return strings.NewReplacer(" ", "_", "/", "_").Replace(s) }

// BenchmarkGatewayBoot boots the real gateway the way gatewayd does in a
// Pod (loopback-only namespace, private /tmp, the rendered configuration)
// with the gateway's startup trace on, and reports launch-to-ready and the
// trace's larger phases per variant: "cold_full" (an empty compile cache and
// every default component: every Pod before issue 23), "warm_full"
// (OCE_COMPILE_CACHE filled beforehand by one warm-up boot, as the gateway
// image's is at build) and "warm_lean" (that cache and the lean rendering:
// oce now). The variants alternate within each iteration, the first one
// rotating too; metrics are means over b.N (run with -benchtime Nx).
func BenchmarkGatewayBoot(b *testing.B) {
	require.NoError(b, netns.Isolated())
	paths, err := runtimes.Ensure(b.Context())
	require.NoError(b, err)
	prebuilt := filepath.Join(b.TempDir(), "compile-cache")
	require.NoError(b, os.MkdirAll(prebuilt, 0o755))
	warmup := bootGatewayd(b, paths, bootVariant{name: "warm-up", cache: prebuilt, admitted: map[string]any{}})
	key, err := runtimes.CompileCacheKey(paths.OpenClawMJS)
	require.NoError(b, err)
	entries := runtimes.CompileCacheEntries(filepath.Join(prebuilt, key))
	require.Positive(b, entries, "the warm-up boot filled no compile cache")
	b.ReportMetric(float64(entries), "cache_entries")
	b.ReportMetric(float64(warmup.ready.Milliseconds()), "warmup_ready_ms")
	// an embedded Agent's document as the Pods run it in the tests: the
	// model on a custom endpoint (an official OpenAI endpoint would make the
	// gateway try to install the codex runtime plugin from npm at every
	// start: docs/PERFORMANCE.md)
	model := map[string]any{"agents": map[string]any{"defaults": map[string]any{"model": "openai/gpt-fake-1"}},
		"models": map[string]any{"providers": map[string]any{"openai": builtinOverride(
			modelref.Ref{Provider: "openai", Model: "gpt-fake-1"}, "http://127.0.0.1:9")}}}
	// "full" asks explicitly for what the lean rendering switches off (the
	// user's setting wins): the boot oce rendered before issue 23
	full := map[string]any{"agents": model["agents"], "models": model["models"],
		"gateway": map[string]any{"controlUi": map[string]any{"enabled": true}},
		"plugins": map[string]any{"entries": map[string]any{}}}
	for id := range startupProviderPlugins(paths.OpenClawMJS) {
		full["plugins"].(map[string]any)["entries"].(map[string]any)[id] = map[string]any{"enabled": true}
	}
	variants := []bootVariant{
		{name: "cold_full", admitted: full},
		{name: "warm_full", cache: prebuilt, admitted: full},
		{name: "warm_lean", cache: prebuilt, admitted: model},
	}
	sums := map[string]*bootRun{}
	for i := 0; i < b.N; i++ {
		for j := range variants {
			v := variants[(i+j)%len(variants)]
			r := bootGatewayd(b, paths, v)
			if v.cache != "" {
				require.Equal(b, string(runtimes.CompileCachePrebuilt), r.cache)
			}
			s := sums[v.name]
			if s == nil {
				s = &bootRun{phases: map[string]float64{}}
				sums[v.name] = s
			}
			s.ready += r.ready
			s.prespawn += r.prespawn
			for k, ms := range r.phases {
				s.phases[k] += ms
			}
		}
	}
	n := float64(b.N)
	// the trace's phases of at least reportPhaseMs in some variant
	const reportPhaseMs = 250
	big := map[string]bool{}
	for _, s := range sums {
		for k, ms := range s.phases {
			if ms/n >= reportPhaseMs {
				big[k] = true
			}
		}
	}
	names := make([]string, 0, len(big))
	for k := range big {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, v := range variants {
		s := sums[v.name]
		b.ReportMetric(float64(s.ready.Milliseconds())/n, v.name+"_ready_ms")
		b.ReportMetric(s.prespawn/n, v.name+"_prespawn_ms")
		for _, k := range names {
			b.ReportMetric(s.phases[k]/n, v.name+"_"+metricName(k)+"_ms")
		}
	}
}
