// Package memlimit gives the coordinator a soft Go memory limit below its
// container's: a leader's watch-fed caches grow with the Agents it runs
// (~70 KB of live heap an Agent, docs/kubernetes.md "Memory"), and with
// the default GOGC the heap may grow to twice its live size between
// collections. Under a soft limit the collector works harder as the heap
// nears the container's limit instead of the kernel killing the member.
package memlimit

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// Fraction of the container's memory limit the Go heap is held under; the
// rest is for the runtime's own overhead, stacks and what is not Go heap.
const Fraction = 0.9

// CgroupFiles are where a container's memory limit is read: cgroup v2,
// then v1.
var CgroupFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// unlimitedV1 is the least value cgroup v1 reports for "no limit" (the
// largest page-aligned int64).
const unlimitedV1 = int64(1) << 62

// ParseLimit parses a cgroup memory limit file's content: a byte count,
// or "max" (cgroup v2) or a huge page-aligned count (v1) for no limit. ok
// is false for no limit and for anything else.
func ParseLimit(content string) (bytes int64, ok bool) {
	v := strings.TrimSpace(content)
	if v == "" || v == "max" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 || n >= unlimitedV1 {
		return 0, false
	}
	return n, true
}

// ContainerLimit is the memory limit in the first of files that names one.
func ContainerLimit(files ...string) (int64, bool) {
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if n, ok := ParseLimit(string(b)); ok {
			return n, true
		}
	}
	return 0, false
}

// Apply sets the Go soft memory limit to Fraction of the container's
// memory limit read from files, unless GOMEMLIMIT (the operator's own
// choice, which the runtime applies) is set or there is no limit. It
// returns the limit it set, 0 for none.
func Apply(getenv func(string) string, files ...string) int64 {
	if getenv("GOMEMLIMIT") != "" {
		return 0
	}
	n, ok := ContainerLimit(files...)
	if !ok {
		return 0
	}
	limit := int64(float64(n) * Fraction)
	debug.SetMemoryLimit(limit)
	return limit
}
