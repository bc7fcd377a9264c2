package k8stest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// Process is one process of a running Pod, as the host sees it.
type Process struct {
	PID int
	// Name is the program's base name (the executable, or for an
	// interpreter the script it runs, e.g. "node").
	Name string
	// RSS is the resident set size in bytes (VmRSS).
	RSS int64
}

// ErrNoPod: no cgroup of the node holds the Pod (not running here).
var ErrNoPod = errors.New("k8stest: no cgroup holds the pod")

// PodProcesses lists the processes of a running Pod (its sandbox and every
// container) from the kubelet's cgroup of it (pod<uid> below the node's
// cgroup root), with their resident memory.
func (c *Cluster) PodProcesses(uid types.UID) ([]Process, error) {
	want := "pod" + string(uid)
	pids := map[int]bool{}
	found := false
	for _, h := range cgroupHierarchies() {
		if filepath.Base(h) != "memory" && h != "/sys/fs/cgroup" {
			continue // one hierarchy is enough: the memory one (v1), or the unified one
		}
		_ = filepath.WalkDir(filepath.Join(h, c.cgroupRoot), func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() || d.Name() != want {
				return nil
			}
			found = true
			for _, pid := range cgroupPIDs(strings.TrimPrefix(p, h)) {
				pids[pid] = true
			}
			return filepath.SkipDir
		})
	}
	if !found {
		return nil, fmt.Errorf("%w: %s", ErrNoPod, uid)
	}
	var out []Process
	for pid := range pids {
		pr, err := readProcess(pid)
		if err != nil {
			continue // exited meanwhile
		}
		out = append(out, pr)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out, nil
}

// readProcess reads a process's name and VmRSS from /proc.
func readProcess(pid int) (Process, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Process{}, err
	}
	pr := Process{PID: pid}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				pr.RSS = kb * 1024
			}
		}
		if v, ok := strings.CutPrefix(line, "Name:"); ok {
			pr.Name = strings.TrimSpace(v)
		}
	}
	if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil {
		pr.Name = filepath.Base(strings.TrimSuffix(exe, " (deleted)"))
	}
	return pr, nil
}

// PodMemoryPeak is the highest memory use the kernel recorded for a Pod's
// cgroup since it started (memory.max_usage_in_bytes on cgroup v1,
// memory.peak on v2): resident memory and page cache together, what a
// memory limit is judged against before the cache is reclaimed.
func (c *Cluster) PodMemoryPeak(uid types.UID) (int64, error) {
	want := "pod" + string(uid)
	var peak int64 = -1
	for _, h := range cgroupHierarchies() {
		if filepath.Base(h) != "memory" && h != "/sys/fs/cgroup" {
			continue
		}
		_ = filepath.WalkDir(filepath.Join(h, c.cgroupRoot), func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() || d.Name() != want {
				return nil
			}
			for _, f := range []string{"memory.max_usage_in_bytes", "memory.peak"} {
				if b, err := os.ReadFile(filepath.Join(p, f)); err == nil {
					if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
						peak = v
					}
				}
			}
			return filepath.SkipDir
		})
	}
	if peak < 0 {
		return 0, fmt.Errorf("%w: %s", ErrNoPod, uid)
	}
	return peak, nil
}
