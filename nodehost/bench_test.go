package nodehost

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"oce.dev/oce/shared/ocproto"
	"oce.dev/oce/shared/runtimes"
)

func rssKB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			f := strings.Fields(l)
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

// treeRSSKB sums VmRSS over pid and its descendants.
func treeRSSKB(root int) int64 {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], pid)
	}
	total := int64(0)
	stack := []int{root}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		total += rssKB(p)
		stack = append(stack, children[p]...)
	}
	return total
}

func buildNodehost(b *testing.B) string {
	bin := filepath.Join(b.TempDir(), "nodehost")
	out, err := exec.Command("go", "build", "-o", bin, "oce.dev/oce/cmd/nodehost").CombinedOutput()
	if err != nil {
		b.Fatalf("build nodehost: %v\n%s", err, out)
	}
	return bin
}

// BenchmarkLaunchToHello compares exec → hello-ok time and RSS of oce's
// nodehost and the real `openclaw node run` against the same real gateway.
func BenchmarkLaunchToHello(b *testing.B) {
	g := realGateway(b)
	bin := buildNodehost(b)
	rt, err := runtimes.Ensure(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	op, err := ocproto.DialOperator(ctx, ocproto.OperatorConfig{URL: g.URL, Password: g.Password})
	if err != nil {
		b.Fatal(err)
	}
	defer op.Close()
	var goMs, goRSS, ocMs, ocRSS []float64
	for i := 0; i < b.N; i++ {
		// oce nodehost: enrollment file → "connected to gateway" log line
		dir := b.TempDir()
		sc, err := op.SetupCode(ctx, g.URL)
		if err != nil {
			b.Fatal(err)
		}
		enroll := filepath.Join(dir, "enroll")
		_ = os.WriteFile(enroll, []byte(sc.SetupCode), 0o600)
		cmd := exec.Command(bin, "run", "--state-dir", filepath.Join(dir, "s"), "--workspace", filepath.Join(dir, "w"), "--enrollment-file", enroll)
		stderr, _ := cmd.StderrPipe()
		start := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		sc2 := bufio.NewScanner(stderr)
		connected := false
		for sc2.Scan() {
			if strings.Contains(sc2.Text(), "connected to gateway") {
				connected = true
				break
			}
		}
		if !connected {
			b.Fatal("nodehost never connected")
		}
		goMs = append(goMs, float64(time.Since(start).Microseconds())/1000)
		goRSS = append(goRSS, float64(rssKB(cmd.Process.Pid))/1024)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()

		// the real openclaw node host
		name := fmt.Sprintf("bench-real-%d-%d", time.Now().UnixNano(), i)
		// enrolled the same way: a one-use setup code
		ocCode, err := op.SetupCode(ctx, g.URL)
		if err != nil {
			b.Fatal(err)
		}
		oc := exec.Command(rt.Node, rt.OpenClawMJS, "node", "run", "--pair", ocCode.SetupCode, "--host", "127.0.0.1",
			"--port", strconv.Itoa(g.Port), "--no-tls", "--display-name", name)
		oc.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Join(dir, "oc-home"), "OPENCLAW_STATE_DIR=" + filepath.Join(dir, "oc-state"),
			"OPENCLAW_DISABLE_BONJOUR=1", "OPENCLAW_NO_AUTO_UPDATE=1", "TMPDIR=" + dir}
		ocLog, _ := os.Create(filepath.Join(dir, "oc.log"))
		oc.Stdout, oc.Stderr = ocLog, ocLog
		oc.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		start = time.Now()
		if err := oc.Start(); err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(3 * time.Minute)
		seen := false
		for time.Now().Before(deadline) && !seen {
			nodes, _ := op.NodeList(ctx)
			for _, n := range nodes {
				if n.DisplayName == name && n.Connected {
					seen = true
				}
			}
			if !seen {
				time.Sleep(100 * time.Millisecond)
			}
		}
		if !seen {
			_ = syscall.Kill(-oc.Process.Pid, syscall.SIGKILL)
			tail, _ := os.ReadFile(filepath.Join(dir, "oc.log"))
			b.Fatalf("openclaw node run never connected:\n%s", tail)
		}
		ocMs = append(ocMs, float64(time.Since(start).Microseconds())/1000)
		ocRSS = append(ocRSS, float64(treeRSSKB(oc.Process.Pid))/1024)
		_ = syscall.Kill(-oc.Process.Pid, syscall.SIGKILL)
		_ = oc.Wait()
	}
	med := func(v []float64) float64 { sort.Float64s(v); return v[len(v)/2] }
	b.ReportMetric(med(goMs), "nodehost-ms")
	b.ReportMetric(med(ocMs), "openclaw-node-ms")
	b.ReportMetric(med(ocMs)/med(goMs), "launch-speedup-x")
	b.ReportMetric(med(goRSS), "nodehost-MB")
	b.ReportMetric(med(ocRSS), "openclaw-node-MB")
	b.ReportMetric(med(ocRSS)/med(goRSS), "rss-ratio-x")
}

func BenchmarkFileFetchThroughput(b *testing.B) {
	dir := b.TempDir()
	ws := filepath.Join(dir, "ws")
	_ = os.MkdirAll(ws, 0o700)
	data := make([]byte, 4<<20)
	_ = os.WriteFile(filepath.Join(ws, "AGENTS.md"), data, 0o600)
	h, err := New(Config{StateDir: filepath.Join(dir, "s"), Workspace: ws})
	if err != nil {
		b.Fatal(err)
	}
	params := []byte(`{"path":"AGENTS.md"}`)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := h.Dispatch(context.Background(), "file.fetch", params); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAdmissionDecision(b *testing.B) {
	w, err := NewWorkers(8, b.TempDir(), []string{"sleep", "3600"}, os.Environ())
	if err != nil {
		b.Fatal(err)
	}
	defer w.StopAll(context.Background())
	for i := 0; i < 8; i++ {
		if _, _, err := w.Admit(fmt.Sprintf("s%d", i), "l"); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// at capacity: the refusal is the decision measured; and an
		// already-admitted session's idempotent re-admission
		if _, _, err := w.Admit("new", "l"); err != ErrCapacity {
			b.Fatal(err)
		}
		if _, _, err := w.Admit("s3", "l"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N), "ns/decision")
}
