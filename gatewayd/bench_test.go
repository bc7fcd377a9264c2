package gatewayd

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/netns"
	"oce.dev/oce/shared/runtimes"
)

// benchIdle is how long the idle supervision is sampled.
const benchIdle = 20 * time.Second

// pollUntil200 polls url every 20 ms and returns when it answers 200; the
// zero time when it never did within.
func pollUntil200(url string, within time.Duration) time.Time {
	c := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if resp, err := c.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return time.Now()
			}
		}
		time.Sleep(20 * time.Millisecond) // the polling granularity of the measurement itself
	}
	return time.Time{}
}

// cpuTicks is utime+stime of pid in clock ticks.
func cpuTicks(tb testing.TB, pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	require.NoError(tb, err)
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return u + st
}

// statusKB reads a VmXXX line of /proc/pid/status in kB.
func statusKB(tb testing.TB, pid int, key string) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	require.NoError(tb, err)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, key+":") {
			v, _ := strconv.ParseFloat(strings.Fields(l)[1], 64)
			return v
		}
	}
	return 0
}

// overhead is one gatewayd measurement.
type overhead struct {
	ready, lag             time.Duration
	prespawn, startupCPUms float64
	rss, hwm, anon, file   float64 // kB
	cpuPct                 float64
	stop                   time.Duration
	exit                   int
}

// benchBare launches a bare `openclaw gateway run` (same config shape and
// environment as under gatewayd) and returns its launch-to-/readyz time.
func benchBare(b *testing.B, paths runtimes.Paths) time.Duration {
	// bare gateway, same config shape and environment
	dir := b.TempDir()
	for _, d := range []string{"home", "tmp", "state", "logs"} {
		require.NoError(b, os.MkdirAll(filepath.Join(dir, d), 0o700))
	}
	port := freePort(b)
	r, err := Render(nil, RenderInput{Topology: contract.DedicatedOpenClaw, Port: port, Bind: "loopback", LogLevel: "info",
		LogFile: filepath.Join(dir, "logs", "openclaw.log")})
	require.NoError(b, err)
	cfgPath := filepath.Join(dir, "openclaw.json")
	require.NoError(b, os.WriteFile(cfgPath, r.JSON, 0o600))
	argv := paths.OpenClawCommand("gateway", "run", "--port", strconv.Itoa(port), "--bind", "loopback", "--auth", "password")
	bare := exec.Command(argv[0], argv[1:]...)
	bare.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Join(dir, "home"), "TMPDIR=" + filepath.Join(dir, "tmp"),
		"OPENCLAW_STATE_DIR=" + filepath.Join(dir, "state"), "OPENCLAW_CONFIG_PATH=" + cfgPath,
		"OPENCLAW_GATEWAY_PASSWORD=bench-password-1", "OPENCLAW_DISABLE_BONJOUR=1", "OPENCLAW_NO_AUTO_UPDATE=1",
		"OPENCLAW_SKIP_CHANNELS=1"}
	bare.Dir = filepath.Join(dir, "state")
	var bareOut bytes.Buffer
	bare.Stdout, bare.Stderr = &bareOut, &bareOut
	bare.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	launch := time.Now()
	require.NoError(b, bare.Start())
	bareAt := pollUntil200("http://127.0.0.1:"+strconv.Itoa(port)+"/readyz", realReady)
	require.False(b, bareAt.IsZero(), "bare gateway never ready:\n%s", bareOut.String())
	bareReady := bareAt.Sub(launch)
	_ = syscall.Kill(-bare.Process.Pid, syscall.SIGTERM)
	_ = bare.Wait()

	return bareReady
}

// launchGatewayd starts `tini -s -e 143 -- gatewayd` with env in its own
// process group and returns it, its output and when it was launched.
func launchGatewayd(b *testing.B, env map[string]string) (*exec.Cmd, *syncBuf, time.Time) {
	cmd := exec.Command(tiniBin, "-s", "-e", "143", "--", gatewaydBin)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	lg := &syncBuf{}
	cmd.Stdout, cmd.Stderr = lg, lg
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 10 * time.Second
	launch := time.Now()
	require.NoError(b, cmd.Start())
	return cmd, lg, launch
}

// benchGatewayd launches gatewayd under tini; with idle it also samples the
// supervision of the idle gateway.
func benchGatewayd(b *testing.B, paths runtimes.Paths, idle bool) overhead {
	var o overhead
	// the same gateway under gatewayd
	gdir := b.TempDir()
	env := gwEnv(b, gdir, contract.DedicatedOpenClaw, freePort(b), freePort(b))
	env["OCE_OPENCLAW_BIN"] = strings.Join(paths.OpenClawCommand(), " ")
	writeJSONFile(b, env["OPENCLAW_CONFIG_PATH"], map[string]any{})
	cmd, lg, launch := launchGatewayd(b, env)
	childReadyAt := make(chan time.Time, 1)
	go func() {
		childReadyAt <- pollUntil200("http://127.0.0.1:"+env["OPENCLAW_GATEWAY_PORT"]+"/readyz", realReady)
	}()
	gwReadyAt := pollUntil200("http://"+env["OCE_STATUS_ADDR"]+"/readyz", realReady)
	childAt := <-childReadyAt
	require.False(b, gwReadyAt.IsZero() || childAt.IsZero(), "gatewayd never ready:\n%s", lg.String())
	gwReady := gwReadyAt.Sub(launch)
	lag := gwReadyAt.Sub(childAt)
	var prespawn float64
	for _, rec := range lg.phase(PhaseNativeSpawn) {
		prespawn, _ = rec["sinceStartMs"].(float64)
	}
	kids := childPids(cmd.Process.Pid)
	require.Len(b, kids, 1)
	gpid := kids[0]

	o.ready, o.lag, o.prespawn = gwReady, lag, prespawn
	o.startupCPUms = float64(cpuTicks(b, gpid)) * 10
	if idle {
		// idle supervision with a kubelet-like probe every 2 s
		c0, t0 := cpuTicks(b, gpid), time.Now()
		probe := time.NewTicker(2 * time.Second)
		for end := time.Now().Add(benchIdle); time.Now().Before(end); {
			<-probe.C
			if resp, err := http.Get("http://" + env["OCE_STATUS_ADDR"] + "/readyz"); err == nil {
				resp.Body.Close()
			}
		}
		probe.Stop()
		c1, t1 := cpuTicks(b, gpid), time.Now()
		rss, hwm := statusKB(b, gpid, "VmRSS"), statusKB(b, gpid, "VmHWM")
		anon, file := statusKB(b, gpid, "RssAnon"), statusKB(b, gpid, "RssFile")
		cpuPct := float64(c1-c0) / 100 / t1.Sub(t0).Seconds() * 100 // USER_HZ is 100

		o.rss, o.hwm, o.anon, o.file, o.cpuPct = rss, hwm, anon, file, cpuPct
	}
	stopAt := time.Now()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	o.stop, o.exit = time.Since(stopAt), cmd.ProcessState.ExitCode()
	return o
}

// BenchmarkGatewaydOverhead measures a bare `openclaw gateway run`
// launch-to-ready beside the same gateway under gatewayd (under tini), in
// alternating order, then gatewayd's RSS and CPU while it supervises the idle
// gateway with a kubelet-like readiness poll every 2 s. Metrics are means
// over b.N pairs (run with -benchtime Nx).
func BenchmarkGatewaydOverhead(b *testing.B) {
	require.NoError(b, netns.Isolated())
	paths, err := runtimes.Ensure(b.Context())
	require.NoError(b, err)
	var bareSum, gwSum, lagSum time.Duration
	var prespawnSum, cpuStartSum float64
	var last overhead
	for i := 0; i < b.N; i++ {
		var bare time.Duration
		var o overhead
		if i%2 == 0 {
			bare = benchBare(b, paths)
			o = benchGatewayd(b, paths, i == b.N-1)
		} else {
			o = benchGatewayd(b, paths, i == b.N-1)
			bare = benchBare(b, paths)
		}
		require.Equal(b, 0, o.exit)
		bareSum += bare
		gwSum += o.ready
		lagSum += o.lag
		prespawnSum += o.prespawn
		cpuStartSum += o.startupCPUms
		last = o
	}
	n := float64(b.N)
	b.ReportMetric(float64(bareSum.Milliseconds())/n, "bare_ready_ms")
	b.ReportMetric(float64(gwSum.Milliseconds())/n, "gatewayd_ready_ms")
	b.ReportMetric(float64((gwSum-bareSum).Milliseconds())/n, "added_ms")
	b.ReportMetric(prespawnSum/n, "prespawn_ms")
	b.ReportMetric(float64(lagSum.Milliseconds())/n, "ready_lag_ms")
	b.ReportMetric(cpuStartSum/n, "startup_cpu_ms")
	b.ReportMetric(last.rss/1024, "rss_MB")
	b.ReportMetric(last.hwm/1024, "hwm_MB")
	b.ReportMetric(last.anon/1024, "rss_anon_MB")
	b.ReportMetric(last.file/1024, "rss_file_MB")
	b.ReportMetric(last.cpuPct, "cpu_pct")
	b.ReportMetric(float64(last.stop.Milliseconds()), "stop_ms")
}
