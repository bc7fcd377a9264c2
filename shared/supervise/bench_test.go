package supervise_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/shared/supervise"
)

// nodeWrapper is the reference's shape: a `node -e` program that spawns the
// child, forwards SIGTERM/SIGINT and propagates the exit status.
const nodeWrapper = `const {spawn}=require('child_process');` +
	`const c=spawn('/bin/sleep',['1000'],{stdio:'inherit'});` +
	`for(const s of ['SIGTERM','SIGINT'])process.on(s,()=>c.kill(s));` +
	`c.on('exit',(code,sig)=>process.exit(code??128+require('os').constants.signals[sig]));`

const nodeReady = nodeWrapper + `console.log('READY pid='+process.pid);`

const nodeListenReady = nodeWrapper +
	`const srv=require('net').createServer(()=>{});` +
	`srv.listen(0,'127.0.0.1',()=>console.log('READY pid='+process.pid+' addr=127.0.0.1:'+srv.address().port));`

// vmRSS reads a process's resident set size in kB.
func vmRSS(b *testing.B, pid int) float64 {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(b, err)
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			require.NoError(b, err)
			return kb
		}
	}
	require.FailNow(b, "no VmRSS")
	return 0
}

// readyAt starts argv, waits for its READY line and returns the process and
// the time from exec to readiness.
func readyAt(b *testing.B, argv ...string) (*child, time.Duration) {
	b.Helper()
	t0 := time.Now()
	c := spawn(b, supervise.Spec{Path: argv[0], Args: argv[1:], StopBudget: 5 * time.Second})
	line := c.expect(b, "READY")
	d := time.Since(t0)
	require.Equal(b, c.Pid(), field(b, line, "pid"))
	return c, d
}

func stop(b *testing.B, c *child) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(b, c.Stop(ctx))
}

// BenchmarkIdleSupervisorRSS compares the resident memory of the Go
// supervisor and of a `node -e` wrapper, each supervising sleep, once ready.
func BenchmarkIdleSupervisorRSS(b *testing.B) {
	var goKB, nodeKB float64
	n := 0
	for b.Loop() {
		c, _ := readyAt(b, helper, "supervise", "--", "/bin/sleep", "1000")
		goKB += vmRSS(b, c.Pid())
		stop(b, c)
		c, _ = readyAt(b, rt.Node, "-e", nodeReady)
		nodeKB += vmRSS(b, c.Pid())
		stop(b, c)
		n++
	}
	b.ReportMetric(goKB/float64(n)/1024, "go-RSS-MB")
	b.ReportMetric(nodeKB/float64(n)/1024, "node-RSS-MB")
	b.ReportMetric(nodeKB/goKB, "node/go-RSS")
}

// BenchmarkExecToReady compares exec → readiness (listening on a TCP port)
// of the Go supervisor and of the node wrapper.
func BenchmarkExecToReady(b *testing.B) {
	var goD, nodeD time.Duration
	n := 0
	for b.Loop() {
		c, d := readyAt(b, helper, "supervise", "-listen", "127.0.0.1:0", "--", "/bin/sleep", "1000")
		goD += d
		stop(b, c)
		c, d = readyAt(b, rt.Node, "-e", nodeListenReady)
		nodeD += d
		stop(b, c)
		n++
	}
	b.ReportMetric(float64(goD.Microseconds())/float64(n)/1000, "go-ready-ms")
	b.ReportMetric(float64(nodeD.Microseconds())/float64(n)/1000, "node-ready-ms")
	b.ReportMetric(float64(nodeD)/float64(goD), "node/go-ready")
}
