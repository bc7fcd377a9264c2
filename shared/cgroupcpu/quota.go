// Package cgroupcpu reads cgroup v2 CPU accounting for the OpenClaw model
// probe: the CPU quota that sizes the probe's cap (20 s wall plus 45
// CPU-seconds at the CPU limit, docs/design/seed-001.md) and the CPU wait counter that tells
// a CPU-starved probe from a slow provider (docs/design/reference.md#s2-1).
package cgroupcpu

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// DefaultRoot is where a container sees its own cgroup v2 directory.
const DefaultRoot = "/sys/fs/cgroup"

// Probe budget of docs/design/seed-001.md: 20 seconds plus 45 CPU-seconds at the CPU limit,
// never more than 10 minutes.
const (
	ProbeWall    = 20 * time.Second
	ProbeCPU     = 45 * time.Second
	ProbeCeiling = 10 * time.Minute
)

// Quota returns the CPU share of the cgroup at DefaultRoot.
func Quota() (share float64, ok bool) { return QuotaAt(DefaultRoot) }

// QuotaAt returns the CPU share (quota/period, in cores) that root/cpu.max
// allows. "max" (unlimited) gives 1, like a missing quota in the reference
// formula. ok is false when the file is missing or malformed.
func QuotaAt(root string) (share float64, ok bool) {
	b, err := os.ReadFile(filepath.Join(root, "cpu.max"))
	if err != nil {
		return 0, false
	}
	s, err := parseCPUMax(string(b))
	if err != nil {
		return 0, false
	}
	return s, true
}

// parseCPUMax parses "$MAX $PERIOD" (cgroup v2 cpu.max).
func parseCPUMax(s string) (float64, error) {
	f := strings.Fields(s)
	if len(f) < 1 || len(f) > 2 {
		return 0, fmt.Errorf("cpu.max: want \"$MAX [$PERIOD]\", got %d fields", len(f))
	}
	period := 100000.0 // kernel default when only the quota is written
	if len(f) == 2 {
		p, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil || p == 0 {
			return 0, fmt.Errorf("cpu.max: bad period %q", f[1])
		}
		period = float64(p)
	}
	if f[0] == "max" {
		return 1, nil
	}
	q, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil || q == 0 {
		return 0, fmt.Errorf("cpu.max: bad quota %q", f[0])
	}
	return float64(q) / period, nil
}

// ProbeCap is the OpenClaw probe's wall-clock cap for a CPU share:
// min(10 min, 20 s + ceil(45 s / min(1, share))), in whole milliseconds. A
// share that is not a positive number counts as one core.
func ProbeCap(share float64) time.Duration {
	if !(share > 0) || math.IsInf(share, 0) {
		share = 1
	}
	share = math.Min(1, share)
	cpuMs := math.Ceil(float64(ProbeCPU.Milliseconds()) / share)
	capMs := math.Min(float64(ProbeCeiling.Milliseconds()), float64(ProbeWall.Milliseconds())+cpuMs)
	return time.Duration(capMs) * time.Millisecond
}

// Starved reports whether a probe that hit its cap spent more than a quarter
// of its elapsed time waiting for CPU: the MODEL_PROBE_CPU_STARVED versus
// MODEL_PROBE_TIMEOUT split. An unknown wait (nil) is never starvation.
func Starved(elapsed time.Duration, cpuWaitMs *int64) bool {
	if cpuWaitMs == nil {
		return false
	}
	return 4*(*cpuWaitMs) > elapsed.Milliseconds()
}
