package nodehost

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// benchHost is a node over a workspace with AGENTS.md (4 KiB), a 4 MiB
// file, memory/ with 100 files and a file 8 directories deep. walk forces
// the component walk instead of openat2.
func benchHost(b *testing.B, walk bool) *Host {
	b.Helper()
	dir := b.TempDir()
	ws := filepath.Join(dir, "ws")
	deep := filepath.Join(ws, "memory", "a", "b", "c", "d", "e", "f", "g")
	if err := os.MkdirAll(deep, 0o700); err != nil {
		b.Fatal(err)
	}
	files := map[string]int{"AGENTS.md": 4 << 10, "big.bin": 4 << 20, "memory/a/b/c/d/e/f/g/deep.md": 512}
	for i := 0; i < 100; i++ {
		files[fmt.Sprintf("memory/note-%03d.md", i)] = 256
	}
	for p, n := range files {
		if err := os.WriteFile(filepath.Join(ws, p), make([]byte, n), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	h, err := New(Config{StateDir: filepath.Join(dir, "s"), Workspace: ws})
	if err != nil {
		b.Fatal(err)
	}
	if walk {
		h.policy.openat2 = false
	}
	return h
}

func benchModes(b *testing.B, f func(b *testing.B, walk bool)) {
	b.Run("openat2", func(b *testing.B) { f(b, false) })
	b.Run("walk", func(b *testing.B) { f(b, true) })
}

// cpuTime is the process's user+system CPU time: on a shared, loaded
// machine it is a steadier cost measure than wall time, which also counts
// the time spent waiting for a CPU.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// dispatchLoop runs one command b.N times and reports, besides wall time,
// the CPU time per operation (cpu-ns/op).
func dispatchLoop(b *testing.B, h *Host, command, params string) {
	b.Helper()
	raw := []byte(params)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	start := cpuTime()
	for i := 0; i < b.N; i++ {
		if _, err := h.Dispatch(ctx, command, raw); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// BenchmarkFileStat: file.stat latency, top level and 8 directories deep.
func BenchmarkFileStat(b *testing.B) {
	benchModes(b, func(b *testing.B, walk bool) {
		h := benchHost(b, walk)
		b.Run("top", func(b *testing.B) { dispatchLoop(b, h, "file.stat", `{"path":"AGENTS.md"}`) })
		b.Run("deep", func(b *testing.B) { dispatchLoop(b, h, "file.stat", `{"path":"memory/a/b/c/d/e/f/g/deep.md"}`) })
	})
}

// BenchmarkDirList: dir.list latency of a 100-entry directory.
func BenchmarkDirList(b *testing.B) {
	benchModes(b, func(b *testing.B, walk bool) {
		dispatchLoop(b, benchHost(b, walk), "dir.list", `{"path":"memory"}`)
	})
}

// BenchmarkFileFetch: file.fetch of a 4 KiB and a 4 MiB file (bytes/s).
func BenchmarkFileFetch(b *testing.B) {
	benchModes(b, func(b *testing.B, walk bool) {
		h := benchHost(b, walk)
		b.Run("4KiB", func(b *testing.B) { b.SetBytes(4 << 10); dispatchLoop(b, h, "file.fetch", `{"path":"AGENTS.md"}`) })
		b.Run("4MiB", func(b *testing.B) { b.SetBytes(4 << 20); dispatchLoop(b, h, "file.fetch", `{"path":"big.bin"}`) })
	})
}

// BenchmarkDeepWrite writes a new file below n new directories; ns per
// component shows whether directory creation is linear in the depth.
func BenchmarkDeepWrite(b *testing.B) {
	for _, walk := range []bool{false, true} {
		for _, n := range []int{64, 256, 1024} {
			name := fmt.Sprintf("openat2/depth=%d", n)
			if walk {
				name = fmt.Sprintf("walk/depth=%d", n)
			}
			b.Run(name, func(b *testing.B) {
				h := benchHost(b, walk)
				ctx := context.Background()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					p := fmt.Sprintf("memory/w%d/", i) + strings.Repeat("d/", n-1) + "f.md"
					if _, err := h.Dispatch(ctx, "file.write", []byte(`{"path":"`+p+`","contentBase64":"eA=="}`)); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/component")
			})
		}
	}
}
