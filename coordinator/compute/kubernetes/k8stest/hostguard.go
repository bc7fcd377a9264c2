package k8stest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// HostSysctls are the host-global settings the kubelet rewrites at start
// (vm.overcommit_memory 0→1, kernel.panic →10, kernel.panic_on_oops →1,
// and the keyring quotas) and kube-proxy could touch; the harness records
// them before the node starts and restores them after it stops.
var HostSysctls = []string{
	"vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
	"kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes", "net.netfilter.nf_conntrack_max",
}

func sysctlPath(name string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(name, ".", "/"))
}

// ReadSysctls returns the current value of each named sysctl that exists.
func ReadSysctls(names []string) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		if b, err := os.ReadFile(sysctlPath(n)); err == nil {
			out[n] = strings.TrimSpace(string(b))
		}
	}
	return out
}

// writeSysctls writes back every recorded value that differs.
func writeSysctls(want map[string]string) error {
	var errs []error
	for n, v := range want {
		b, err := os.ReadFile(sysctlPath(n))
		if err == nil && strings.TrimSpace(string(b)) == v {
			continue
		}
		if err := os.WriteFile(sysctlPath(n), []byte(v+"\n"), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore %s=%s: %w", n, v, err))
		}
	}
	return errors.Join(errs...)
}

// nodeState is where the harness keeps what it must undo on the host, in
// the shared cache, so a run killed before its teardown is repaired by the
// next start: the original sysctls and the cgroup root it created.
type nodeState struct {
	Sysctls    map[string]string `json:"sysctls"`
	CgroupRoot string            `json:"cgroupRoot"`
	CreatedDir []string          `json:"createdDirs,omitempty"`
	RunDir     string            `json:"runDir,omitempty"`
}

func stateRoot() string {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		base = filepath.Join(os.Getenv("HOME"), ".cache")
	}
	return filepath.Join(base, "oce", "k8s-node")
}

// nodeLock serializes real nodes on this machine: the kubelet rewrites
// host-global sysctls, so two nodes at once could not restore them. It
// blocks until the previous holder (another test binary) is done.
type nodeLock struct{ f *os.File }

func lockNode() (*nodeLock, error) {
	if err := os.MkdirAll(stateRoot(), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(stateRoot(), "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return &nodeLock{f: f}, nil
}

func (l *nodeLock) unlock() {
	if l != nil && l.f != nil {
		_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
		l.f.Close()
		l.f = nil
	}
}

func statePath() string { return filepath.Join(stateRoot(), "undo.json") }

func saveState(s nodeState) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return os.WriteFile(statePath(), b, 0o600)
}

// repairStale undoes what a killed run left (under the node lock): it
// restores its recorded sysctls, kills what still runs in its cgroup root
// and removes that root, the directories it created and its run directory.
func repairStale() error {
	b, err := os.ReadFile(statePath())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var s nodeState
	if err := json.Unmarshal(b, &s); err != nil {
		return os.Remove(statePath())
	}
	var errs []error
	if s.CgroupRoot != "" {
		killCgroupTree(s.CgroupRoot)
		errs = append(errs, removeCgroupTree(s.CgroupRoot, 10*time.Second))
	}
	errs = append(errs, writeSysctls(s.Sysctls))
	for _, d := range s.CreatedDir {
		_ = os.Remove(d)
	}
	if s.RunDir != "" {
		_ = os.RemoveAll(s.RunDir)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("k8stest: repair the previous run's leftovers: %w", err)
	}
	return os.Remove(statePath())
}

// RepairHost undoes what a killed run of the real node left on this
// machine (the next StartCluster does it too), under the node lock.
func RepairHost() error {
	l, err := lockNode()
	if err != nil {
		return err
	}
	defer l.unlock()
	return repairStale()
}

// cgroupHierarchies lists the mounted cgroup v1 hierarchies (or the single
// v2 one) under /sys/fs/cgroup.
func cgroupHierarchies() []string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return []string{"/sys/fs/cgroup"}
	}
	ents, _ := os.ReadDir("/sys/fs/cgroup")
	var out []string
	for _, e := range ents {
		p := filepath.Join("/sys/fs/cgroup", e.Name())
		if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
			continue // cpu,cpuacct style symlinks name a hierarchy twice
		}
		if _, err := os.Stat(filepath.Join(p, "cgroup.procs")); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// makeCgroup creates root (e.g. "/oce-k8stest-x") in every hierarchy, with
// the parent's cpuset so tasks can join it.
func makeCgroup(root string) error {
	for _, h := range cgroupHierarchies() {
		dir := filepath.Join(h, root)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if filepath.Base(h) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join(filepath.Dir(dir), f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// cgroupPIDs lists every PID in root's tree (all hierarchies).
func cgroupPIDs(root string) []int {
	seen := map[int]bool{}
	for _, h := range cgroupHierarchies() {
		_ = filepath.WalkDir(filepath.Join(h, root), func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			if err != nil {
				return nil
			}
			for _, f := range strings.Fields(string(b)) {
				if n, err := strconv.Atoi(f); err == nil {
					seen[n] = true
				}
			}
			return nil
		})
	}
	out := make([]int, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Ints(out)
	return out
}

// killCgroupTree SIGKILLs every process in root's tree until none is left
// (new ones cannot appear once containerd and its shims are gone).
func killCgroupTree(root string) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		pids := cgroupPIDs(root)
		if len(pids) == 0 {
			return
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond) // exits are asynchronous; nothing to wait on across processes
	}
}

// removeCgroupTree removes root's directories bottom-up in every hierarchy,
// retrying while the kernel still counts exiting tasks.
func removeCgroupTree(root string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		var left []string
		for _, h := range cgroupHierarchies() {
			top := filepath.Join(h, root)
			var dirs []string
			_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
			for i := len(dirs) - 1; i >= 0; i-- {
				if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
					left = append(left, dirs[i])
				}
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("k8stest: cgroups not removable: %s", strings.Join(left, ", "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// CgroupExists reports whether root exists in any hierarchy.
func CgroupExists(root string) bool {
	for _, h := range cgroupHierarchies() {
		if _, err := os.Stat(filepath.Join(h, root)); err == nil {
			return true
		}
	}
	return false
}

// HostMounts returns the mount points of this process's mount namespace
// (the host's, for a test binary), to compare before and after a cluster.
func HostMounts() ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 {
			out = append(out, f[4])
		}
	}
	sort.Strings(out)
	return out, nil
}
