// Package netns runs oce's tests and demos that start real OpenClaw or Codex
// inside a network namespace that has only loopback, so no traffic can leave
// 127.0.0.0/8. It fails loudly when isolation is impossible; it never falls
// back to the host network.
package netns

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// envIsolated marks a process that already runs inside the isolated namespaces.
const envIsolated = "OCE_NETNS_ISOLATED"

// ErrNotIsolated reports a process that is not in a loopback-only namespace.
var ErrNotIsolated = errors.New("netns: not in a loopback-only network namespace")

// Options select what is isolated besides the network.
type Options struct {
	// PrivateTmp mounts a fresh tmpfs over /tmp inside a private mount
	// namespace (the OpenClaw gateway writes fixed /tmp paths).
	PrivateTmp bool
	// HostNetwork keeps the host's network namespace: only the PID and
	// mount namespaces are new. For suites that start no real OpenClaw or
	// Codex on the host network but start processes that must not outlive
	// the run (Raft members, a control plane, a kubelet node that builds
	// its own network namespace): when the test binary ends, however it
	// ends, the kernel kills everything it left in the PID namespace.
	HostNetwork bool
}

// Runner is what a TestMain hands over: *testing.M satisfies it.
type Runner interface{ Run() int }

// RunnerFunc adapts a function (a suite's own main around m.Run) to Runner.
type RunnerFunc func() int

// Run calls f.
func (f RunnerFunc) Run() int { return f() }

// Main runs m inside a loopback-only network namespace (and a PID namespace
// whose init reaps orphans and takes every leftover process down with it;
// with HostNetwork, only inside the PID and mount namespaces).
// Called from TestMain,
// it re-executes the test binary in new network and mount namespaces (a user
// namespace too when not root), brings loopback up, optionally mounts a
// private /tmp, verifies the result and only then runs the tests. It never
// returns: it exits with the tests' status, or 1 with a clear message when
// isolation is impossible.
func Main(m Runner, opts Options) {
	switch os.Getenv(envIsolated) {
	case "":
		os.Exit(reexec(opts))
	case "init":
		os.Exit(initMain(opts))
	}
	if opts.HostNetwork {
		os.Exit(m.Run())
	}
	if err := Isolated(); err != nil {
		fmt.Fprintf(os.Stderr, "netns: cannot isolate the test binary: %v\n", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// initMain runs as PID 1 of the new PID namespace: it sets up loopback, /proc
// and /tmp, starts the test binary as its child, reaps every orphan, and
// exits with the child's status — at which point the kernel kills whatever
// the tests left behind in the namespace.
func initMain(opts Options) int {
	if err := setupInside(opts); err != nil {
		fmt.Fprintf(os.Stderr, "netns: cannot isolate the test binary: %v\n", err)
		return 1
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "netns: find test binary: %v\n", err)
		return 1
	}
	env := append(withoutEnv(os.Environ(), envIsolated), envIsolated+"=1")
	pid, err := syscall.ForkExec(exe, os.Args, &syscall.ProcAttr{Env: env,
		Files: []uintptr{os.Stdin.Fd(), os.Stdout.Fd(), os.Stderr.Fd()}})
	if err != nil {
		fmt.Fprintf(os.Stderr, "netns: start test binary: %v\n", err)
		return 1
	}
	defer forwardSignals(pid)()
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return 1
		}
		if got == pid {
			if ws.Signaled() {
				return 128 + int(ws.Signal())
			}
			return ws.ExitStatus()
		}
	}
}

// forwardSignals passes SIGINT and SIGTERM on to pid (the namespace's init,
// then the test binary), so a suite's own teardown runs when its run is
// interrupted; the returned func stops forwarding.
func forwardSignals(pid int) func() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				_ = syscall.Kill(pid, s.(syscall.Signal))
			case <-done:
				return
			}
		}
	}()
	return func() { signal.Stop(sigs); close(done) }
}

// Isolated reports whether the current process can reach nothing but
// loopback: loopback is up, and every other interface is down and has no
// address. A new namespace holds only loopback, but the kernel adds
// fallback devices of some loaded modules (ifb0, tunl0, sit0…) to every new
// namespace; down and addressless, they cannot carry a packet.
func Isolated() error {
	ifs, err := net.Interfaces()
	if err != nil {
		return fmt.Errorf("netns: list interfaces: %w", err)
	}
	seen := make([]iface, 0, len(ifs))
	for _, i := range ifs {
		addrs, err := i.Addrs()
		if err != nil {
			return fmt.Errorf("netns: addresses of %s: %w", i.Name, err)
		}
		seen = append(seen, iface{name: i.Name, loopback: i.Flags&net.FlagLoopback != 0,
			up: i.Flags&net.FlagUp != 0, addrs: len(addrs)})
	}
	return onlyLoopback(seen)
}

// iface is what onlyLoopback judges of one interface.
type iface struct {
	name     string
	loopback bool
	up       bool
	addrs    int
}

func onlyLoopback(ifs []iface) error {
	lo := false
	for _, i := range ifs {
		switch {
		case i.name == "lo" && i.loopback:
			if !i.up {
				return fmt.Errorf("%w: loopback is down", ErrNotIsolated)
			}
			lo = true
		case i.up || i.addrs > 0:
			return fmt.Errorf("%w: interface %q is present (up or addressed)", ErrNotIsolated, i.name)
		}
	}
	if !lo {
		return fmt.Errorf("%w: no loopback interface", ErrNotIsolated)
	}
	return nil
}

// FreshEnv is this process's environment without netns's own mark, for a
// child that must make its own namespaces (a program that calls Main, like
// the images' smoke checks) rather than take this process's namespace for
// an isolated one — a suite on the host network (HostNetwork) is not.
func FreshEnv() []string { return withoutEnv(os.Environ(), envIsolated) }

func reexec(opts Options) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "netns: find test binary: %v\n", err)
		return 1
	}
	cmd := exec.Command(exe, os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(withoutEnv(os.Environ(), envIsolated), envIsolated+"=init")
	cmd.SysProcAttr = sysProcAttr(opts)
	err = cmd.Start()
	if err == nil {
		stop := forwardSignals(cmd.Process.Pid)
		err = cmd.Wait()
		stop()
	}
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		fmt.Fprintf(os.Stderr, "netns: cannot create a loopback-only network namespace: %v\n"+
			"netns: run as root, or enable unprivileged user namespaces (kernel.unprivileged_userns_clone=1)\n", err)
		return 1
	}
	return 0
}

func sysProcAttr(opts Options) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWPID, Pdeathsig: syscall.SIGKILL}
	if !opts.HostNetwork {
		attr.Cloneflags |= syscall.CLONE_NEWNET
	}
	if os.Geteuid() != 0 {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	return attr
}

func setupInside(opts Options) error {
	if !opts.HostNetwork {
		if err := LoopbackUp(); err != nil {
			return err
		}
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	// A /proc of the new PID namespace, so /proc/<pid> names our children.
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	if opts.PrivateTmp {
		if err := privateTmp(); err != nil {
			return err
		}
	}
	if opts.HostNetwork {
		return nil
	}
	return Isolated()
}

// privateTmp mounts a fresh tmpfs over /tmp and binds back only the host /tmp
// entries this process itself depends on: the directory of its executable,
// any /tmp path in its arguments (go test keeps its build dir and test log
// there), its working directory and the Go toolchain's directories.
func privateTmp() error {
	old, err := unix.Open("/tmp", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open /tmp: %w", err)
	}
	defer unix.Close(old)
	if err := unix.Mount("tmpfs", "/tmp", "tmpfs", 0, "mode=1777"); err != nil {
		return fmt.Errorf("mount private /tmp: %w", err)
	}
	for _, top := range hostTmpKeep() {
		dst := "/tmp/" + top
		src := fmt.Sprintf("/proc/self/fd/%d/%s", old, top)
		st, err := os.Stat(src)
		if err != nil {
			continue // named in an argument but not (yet) there
		}
		if st.IsDir() {
			err = os.MkdirAll(dst, 0o700)
		} else {
			err = os.WriteFile(dst, nil, 0o600)
		}
		if err != nil {
			return fmt.Errorf("keep %s: %w", dst, err)
		}
		if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s back: %w", dst, err)
		}
	}
	return nil
}

// hostTmpKeep lists the first path components under /tmp that this process
// names in its executable path or arguments.
func hostTmpKeep() []string {
	seen := map[string]bool{}
	var out []string
	add := func(p string) {
		if i := strings.Index(p, "/tmp/"); i >= 0 {
			rest := p[i+len("/tmp/"):]
			if j := strings.IndexByte(rest, '/'); j >= 0 {
				rest = rest[:j]
			}
			if rest != "" && !seen[rest] && strings.HasPrefix(p[i:], "/tmp/") && (i == 0 || p[i-1] == '=') {
				seen[rest] = true
				out = append(out, rest)
			}
		}
	}
	if exe, err := os.Executable(); err == nil {
		add(exe)
	}
	for _, a := range os.Args {
		add(a)
	}
	// The working tree (a checkout may live under /tmp) and the Go toolchain's
	// own directories stay usable: tests build binaries from the module.
	if wd, err := os.Getwd(); err == nil {
		add(wd)
	}
	for _, k := range []string{"HOME", "GOCACHE", "GOMODCACHE", "GOPATH", "GOTMPDIR", "XDG_CACHE_HOME"} {
		if v := os.Getenv(k); v != "" {
			add(v)
		}
	}
	return out
}

// LoopbackUp brings the loopback interface of the current network namespace up.
func LoopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("netns: socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("netns: ifreq: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("netns: get loopback flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("netns: bring loopback up: %w", err)
	}
	return nil
}

// Command returns a command that runs name with args in its own
// loopback-only network namespace (and a private /tmp when asked), through
// util-linux unshare. The caller can reach it only from inside the same
// namespace, so most tests use Main instead and start commands plainly.
func Command(opts Options, name string, args ...string) (*exec.Cmd, error) {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return nil, fmt.Errorf("netns: unshare not found: %w", err)
	}
	flags := []string{"--net", "--mount", "--propagation", "private"}
	if os.Geteuid() != 0 {
		flags = append(flags, "--map-root-user")
	}
	script := "ip link set lo up"
	if opts.PrivateTmp {
		script += " && mount -t tmpfs -o mode=1777 tmpfs /tmp"
	}
	script += ` && exec "$0" "$@"`
	argv := append(flags, "--", "/bin/sh", "-c", script, name)
	argv = append(argv, args...)
	cmd := exec.Command(unshare, argv...)
	return cmd, nil
}

// EnterCommand returns a command that runs name with args inside the
// network and mount namespaces of the running process pid (one Command
// started), through util-linux nsenter: a second process sharing the first
// one's loopback-only network and private /tmp.
func EnterCommand(pid int, name string, args ...string) (*exec.Cmd, error) {
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		return nil, fmt.Errorf("netns: nsenter not found: %w", err)
	}
	argv := []string{"--target", strconv.Itoa(pid), "--net", "--mount"}
	if os.Geteuid() != 0 {
		// Command mapped this user to root in a user namespace of its own.
		argv = append(argv, "--user", "--preserve-credentials")
	}
	argv = append(append(argv, "--", name), args...)
	return exec.Command(nsenter, argv...), nil
}

// Describe names the isolation in one line for logs.
func Describe(opts Options) string {
	parts := []string{"loopback-only network namespace"}
	if opts.HostNetwork {
		parts = []string{"host network, private PID namespace"}
	}
	if opts.PrivateTmp {
		parts = append(parts, "private /tmp")
	}
	return strings.Join(parts, ", ")
}

func withoutEnv(env []string, key string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// Reexecuted reports whether this process is the re-executed copy Main
// started inside the namespaces (or its init). A TestMain uses it to do
// what needs the host network (package installs through the registries)
// once, in the outer process, before Main isolates the tests.
func Reexecuted() bool { return os.Getenv(envIsolated) != "" }
