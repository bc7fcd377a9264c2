package nodehost

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	"oce.dev/oce/shared/ocproto"
)

// threads is the process's OS thread count (/proc/self/status). Go never
// retires a thread it created, so this is the high-water mark.
func threads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no Threads line in /proc/self/status")
	return 0
}

// invokeEvent delivers a node.invoke.request event as the gateway sends it.
func invokeEvent(t *testing.T, h *Host, id, command string, params any, timeoutMs int64) {
	t.Helper()
	p, err := json.Marshal(params)
	require.NoError(t, err)
	payload, err := json.Marshal(map[string]any{"id": id, "nodeId": h.DeviceID(), "command": command,
		"paramsJSON": string(p), "timeoutMs": timeoutMs, "idempotencyKey": id})
	require.NoError(t, err)
	h.onEvent(ocproto.Event{Type: "event", Event: "node.invoke.request", Payload: payload})
}

func cancelInvoke(t *testing.T, h *Host, id string) {
	t.Helper()
	payload, err := json.Marshal(map[string]any{"invokeId": id, "nodeId": h.DeviceID()})
	require.NoError(t, err)
	h.onEvent(ocproto.Event{Type: "event", Event: "node.invoke.cancel", Payload: payload})
}

// results collects node.invoke.result payloads by id.
func results(t *testing.T, h *Host, n int) func() map[string]map[string]any {
	ch := make(chan map[string]any, n)
	h.onResult = func(m map[string]any) { ch <- m }
	return func() map[string]map[string]any {
		t.Helper()
		got := map[string]map[string]any{}
		timeout := time.After(time.Minute)
		for len(got) < n {
			select {
			case m := <-ch:
				got[m["id"].(string)] = m
			case <-timeout:
				t.Fatalf("only %d of %d invokes answered", len(got), n)
			}
		}
		return got
	}
}

func errorCode(m map[string]any) string {
	if m["ok"] == true {
		return ""
	}
	return m["error"].(map[string]any)["code"].(string)
}

// Opens that used to block a thread (a FIFO without a writer; a file under
// another process's write lease, which makes a blocking open wait
// lease-break-time, 45 s) now answer at once with a closed code: 200
// requests leave the thread count where the file-op bound puts it.
func TestBlockingOpensDoNotPinThreads(t *testing.T) {
	forBothResolvers(t, func(t *testing.T, walk bool) {
		h, dir := newTestHost(t, walk)
		mem := filepath.Join(dir, "workspace", "memory")
		require.NoError(t, unix.Mkfifo(filepath.Join(mem, "pipe.md"), 0o600))
		leased := filepath.Join(mem, "leased.md")
		require.NoError(t, os.WriteFile(leased, []byte("leased"), 0o600))
		lfd, err := unix.Open(leased, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		require.NoError(t, err)
		_, err = unix.FcntlInt(uintptr(lfd), unix.F_SETLEASE, unix.F_WRLCK)
		require.NoError(t, err, "a write lease on the file")
		t.Cleanup(func() {
			_, _ = unix.FcntlInt(uintptr(lfd), unix.F_SETLEASE, unix.F_UNLCK)
			unix.Close(lfd)
		})

		sha := strings.Repeat("0", 64)
		reqs := []struct {
			cmd    string
			params map[string]any
			code   Code
		}{
			{"file.fetch", map[string]any{"path": "memory/pipe.md"}, CodeNotFile},
			{"file.fetch", map[string]any{"path": "memory/pipe.md", "preflightOnly": true}, CodeNotFile},
			{"workspace.memory", map[string]any{"op": "read", "path": "memory/pipe.md"}, CodeNotFile},
			{"file.stat", map[string]any{"path": "memory/pipe.md"}, CodeNotFile},
			{"dir.list", map[string]any{"path": "memory/pipe.md"}, CodeNotDirectory},
			{"file.write", map[string]any{"path": "memory/pipe.md", "contentBase64": b64("x"), "expectedSha256": sha}, CodeNotFile},
			{"file.fetch", map[string]any{"path": "memory/leased.md"}, CodeUnavailable},
			{"workspace.memory", map[string]any{"op": "read", "path": "memory/leased.md"}, CodeUnavailable},
			{"file.write", map[string]any{"path": "memory/leased.md", "contentBase64": b64("x"), "expectedSha256": sha}, CodeUnavailable},
			{"workspace.memory", map[string]any{"op": "list"}, ""},
		}
		const n = 200
		collect := results(t, h, n)
		before := threads(t)
		for i := 0; i < n; i++ {
			r := reqs[i%len(reqs)]
			invokeEvent(t, h, fmt.Sprintf("r%d", i), r.cmd, r.params, 30_000)
		}
		got := collect()
		for i := 0; i < n; i++ {
			m := got[fmt.Sprintf("r%d", i)]
			require.Equal(t, string(reqs[i%len(reqs)].code), errorCode(m), "%v", m)
		}
		after := threads(t)
		t.Logf("threads: %d before, %d after %d requests", before, after, n)
		require.LessOrEqual(t, after, before+MaxConcurrentFileOps+8, "file requests pinned threads")
		// The lease is being broken (the kernel reports the downgrade it
		// waits for), not gone: no request waited the break time out.
		l, err := unix.FcntlInt(uintptr(lfd), unix.F_GETLEASE, 0)
		require.NoError(t, err)
		require.Equal(t, unix.F_RDLCK, l)
	})
}

// Every file operation honours the request's deadline and the gateway's
// node.invoke.cancel: waiting for a slot (all held here, as by stuck
// operations) ends with UNAVAILABLE, without a thread per waiting request,
// and the invoke bookkeeping is released.
func TestFileOpsHonourDeadlineAndCancel(t *testing.T) {
	h, _ := newTestHost(t, false)
	for i := 0; i < cap(h.fileSlots); i++ {
		h.fileSlots <- struct{}{}
	}
	const n = 100
	collect := results(t, h, 2*n)
	before := threads(t)
	for i := 0; i < n; i++ {
		invokeEvent(t, h, fmt.Sprintf("deadline%d", i), "file.fetch", map[string]any{"path": "AGENTS.md"}, 20)
		invokeEvent(t, h, fmt.Sprintf("cancel%d", i), "workspace.memory", map[string]any{"op": "list"}, 0)
	}
	for i := 0; i < n; i++ {
		cancelInvoke(t, h, fmt.Sprintf("cancel%d", i))
	}
	got := collect()
	for id, m := range got {
		require.Equal(t, string(CodeUnavailable), errorCode(m), id)
		msg := m["error"].(map[string]any)["message"].(string)
		if strings.HasPrefix(id, "deadline") {
			require.Contains(t, msg, "deadline")
		} else {
			require.Contains(t, msg, "cancelled")
		}
	}
	require.LessOrEqual(t, threads(t), before+4, "waiting requests pinned threads")
	require.Eventually(t, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.invokes) == 0
	}, 10*time.Second, 5*time.Millisecond)
	for i := 0; i < cap(h.fileSlots); i++ {
		<-h.fileSlots
	}
	_, err := call(t, h, "file.fetch", map[string]any{"path": "AGENTS.md"})
	require.NoError(t, err)
}

// cancelAfter is a context whose Err turns Canceled after n calls: it
// cancels an operation part-way through, at a deterministic point.
type cancelAfter struct {
	context.Context
	n atomic.Int32
}

func (c *cancelAfter) Err() error {
	if c.n.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// A long read stops between chunks once the request is cancelled.
func TestReadsStopWhenCancelled(t *testing.T) {
	forBothResolvers(t, func(t *testing.T, walk bool) {
		h, dir := newTestHost(t, walk)
		big := make([]byte, 6*readChunk)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "workspace", "memory", "big.md"), big, 0o600))
		for _, tc := range []struct {
			cmd    string
			params string
		}{
			{"file.fetch", `{"path":"memory/big.md"}`},
			{"workspace.memory", `{"op":"read","path":"memory/big.md"}`},
			{"workspace.memory", `{"op":"list"}`},
		} {
			t.Run(tc.cmd, func(t *testing.T) {
				// fileOp looks once; the operation looks again before its
				// first chunk (or directory) and is cancelled after that.
				ctx := &cancelAfter{Context: context.Background()}
				ctx.n.Store(2)
				out, err := h.Dispatch(ctx, tc.cmd, []byte(tc.params))
				require.Nil(t, out)
				requireCode(t, err, CodeUnavailable)
				require.Contains(t, err.Error(), "cancelled")
			})
		}
	})
}
