package occ

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"oce.dev/oce/coordinator/client"
	"oce.dev/oce/shared/netns"
	"oce.dev/oce/shared/runtimes"
)

// Dev defaults.
const (
	// DefaultDevDir is the dev data root; its coordinator/token is the token
	// occ reads by default (./.oce/coordinator/token).
	DefaultDevDir = ".oce"
	// DevReadyTimeout bounds `occ dev up`'s wait for the coordinator.
	DevReadyTimeout = 120 * time.Second
	// DevStopTimeout bounds `occ dev down`'s wait for the coordinator, which
	// stops every runtime on the way out: the Gateway's 330 s stop budget
	// plus the Harness's 120 s (REFERENCE §5.3).
	DevStopTimeout = 460 * time.Second
	devPidsFile    = "pids.json"
	devPoll        = 100 * time.Millisecond
)

// devPids records what `occ dev up` started, for `occ dev down`.
type devPids struct {
	Serve  devPid  `json:"serve"`
	Bridge *devPid `json:"bridge,omitempty"`
	// Namespaced: the coordinator runs in its own loopback-only namespace.
	Namespaced bool   `json:"namespaced"`
	HTTPAddr   string `json:"httpAddr"`
}

type devPid struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"startTime"`
}

func (p devPid) alive() bool {
	if p.PID <= 0 {
		return false
	}
	st, err := startTimeOf(p.PID)
	return err == nil && (p.StartTime == 0 || st == p.StartTime) && !zombie(p.PID)
}

func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, errors.New("malformed /proc stat")
	}
	return strings.Fields(s[i+1:]), nil
}

func startTimeOf(pid int) (uint64, error) {
	f, err := statFields(pid)
	if err != nil || len(f) < 20 {
		return 0, fmt.Errorf("no process %d", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

func zombie(pid int) bool {
	f, err := statFields(pid)
	return err == nil && len(f) > 0 && f[0] == "Z"
}

func (a *app) devCmd() *cobra.Command {
	c := &cobra.Command{Use: "dev", Short: "Run oce on this machine: coordinator, local compute driver, fake model provider"}
	c.AddCommand(a.devUpCmd(), a.devDownCmd(), a.devServeCmd(), a.devBridgeCmd())
	return c
}

func (a *app) devDir(flag string) (string, error) {
	d := first(flag, a.opts.Getenv("OCC_DEV_DIR"), DefaultDevDir)
	if !filepath.IsAbs(d) && a.opts.WorkDir != "" {
		d = filepath.Join(a.opts.WorkDir, d)
	}
	return filepath.Abs(d)
}

func readPids(dir string) (devPids, error) {
	var p devPids
	b, err := os.ReadFile(filepath.Join(dir, devStateDir, devPidsFile))
	if err != nil {
		return p, err
	}
	return p, json.Unmarshal(b, &p)
}

func (a *app) devUpCmd() *cobra.Command {
	var dir, binDir, httpAddr, reply string
	var allowHost bool
	var wait time.Duration
	c := &cobra.Command{
		Use:   "up",
		Short: "Start a single-node coordinator with the local compute driver and the offline fake provider",
		Long: `Installs the pinned runtimes when missing, then starts (in the background) a single-node
coordinator with the local compute driver inside a loopback-only network namespace, together
with the offline fake model provider. The coordinator API is served on a Unix socket in the
data dir and bridged to --http-addr on the host, so every occ command works unchanged.

With OPENAI_API_KEY or ANTHROPIC_API_KEY set, the real provider is used instead; that needs
the host network, which occ refuses unless --allow-host-network is given.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := a.devDir(dir)
			if err != nil {
				return err
			}
			return a.devUp(cmd, d, binDir, httpAddr, reply, allowHost, wait)
		},
	}
	f := c.Flags()
	f.StringVar(&dir, "dir", "", "dev data dir (env OCC_DEV_DIR; default ./"+DefaultDevDir+")")
	f.StringVar(&binDir, "bin-dir", "", "directory of gatewayd, harnessd, nodehost, fakeprovider (default: beside occ)")
	f.StringVar(&httpAddr, "http-addr", "127.0.0.1:7400", "host address of the coordinator API")
	f.StringVar(&reply, "fake-reply", "", "reply text of the fake model provider")
	f.BoolVar(&allowHost, "allow-host-network", false, "run the runtimes on the host network (no isolation; required for a real provider)")
	f.DurationVar(&wait, "wait", DevReadyTimeout, "how long to wait for the coordinator")
	return c
}

// realKeys are the provider keys that select the real provider, and the
// secret files (.oce/secrets/…) they are written to.
var realKeys = []struct{ env, file string }{{"OPENAI_API_KEY", "openai-api-key"}, {"ANTHROPIC_API_KEY", "anthropic-api-key"}}

func (a *app) devUp(cmd *cobra.Command, dir, binDir, httpAddr, reply string, allowHost bool, wait time.Duration) error {
	out := cmd.OutOrStdout()
	ctx := cmd.Context()
	if p, err := readPids(dir); err == nil && p.Serve.alive() {
		fmt.Fprintf(out, "oce dev is already running (pid %d, data in %s)\n", p.Serve.PID, dir)
		printNext(out, p.HTTPAddr, dir)
		return nil
	}
	real := false
	for _, k := range realKeys {
		real = real || a.opts.Getenv(k.env) != ""
	}
	if real && !allowHost {
		return usageError(errors.New("OPENAI_API_KEY/ANTHROPIC_API_KEY is set: the real provider needs the host network, " +
			"so the runtimes cannot be isolated; pass --allow-host-network to accept that, or unset the keys for the offline fake provider"))
	}
	for _, d := range []string{dir, filepath.Join(dir, devStateDir), filepath.Join(dir, devSecretsDir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	fmt.Fprintln(out, "checking the pinned runtimes (installing when missing)…")
	if _, err := runtimes.Ensure(ctx); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if binDir == "" {
		binDir = filepath.Dir(self)
	}
	for _, b := range []string{"gatewayd", "harnessd", "nodehost", "fakeprovider"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			return fmt.Errorf("%s not found in %s: run `make build` (or pass --bin-dir)", b, binDir)
		}
	}
	for _, k := range realKeys {
		if v := a.opts.Getenv(k.env); v != "" {
			if err := os.WriteFile(filepath.Join(dir, devSecretsDir, k.file), []byte(v), 0o600); err != nil {
				return err
			}
		}
	}
	isolated := netns.Isolated() == nil
	namespaced := !isolated && !allowHost
	innerAddr := httpAddr
	if namespaced {
		innerAddr = "127.0.0.1:7400" // inside the namespace; the bridge serves httpAddr on the host
	}
	raftAddr := "127.0.0.1:7300" // the namespace is its own
	if !namespaced {
		// Sharing a network namespace with others (tests, host network):
		// take a free port rather than the fixed one.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		raftAddr = ln.Addr().String()
		ln.Close()
	}
	args := []string{"dev", "serve", "--dir", dir, "--bin-dir", binDir, "--http-addr", innerAddr, "--raft-addr", raftAddr}
	if reply != "" {
		args = append(args, "--fake-reply", reply)
	}
	if allowHost {
		args = append(args, "--allow-host-network")
	}
	if real {
		args = append(args, "--real-provider")
	}
	var serve *exec.Cmd
	if namespaced {
		// A private /tmp would hide the data dir or the binaries when they
		// live under /tmp.
		underTmp := false
		for _, p := range []string{dir, self, binDir} {
			underTmp = underTmp || strings.HasPrefix(p, "/tmp/")
		}
		opts := netns.Options{PrivateTmp: !underTmp}
		if serve, err = netns.Command(opts, self, args...); err != nil {
			return fmt.Errorf("%w; pass --allow-host-network to run without isolation", err)
		}
	} else {
		serve = exec.Command(self, args...)
	}
	pids := devPids{Namespaced: namespaced, HTTPAddr: httpAddr}
	sp, err := startDetached(serve, filepath.Join(dir, devStateDir, "coordinator.log"))
	if err != nil {
		return err
	}
	pids.Serve = sp
	if namespaced {
		bp, err := startDetached(exec.Command(self, "dev", "bridge", "--listen", httpAddr, "--socket", DevAPISocket(dir)),
			filepath.Join(dir, devStateDir, "bridge.log"))
		if err != nil {
			return err
		}
		pids.Bridge = &bp
	}
	b, _ := json.MarshalIndent(pids, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, devStateDir, devPidsFile), b, 0o600); err != nil {
		return err
	}
	fmt.Fprintf(out, "starting the coordinator (%s)…\n", describeIsolation(namespaced, isolated, real))
	ok := false
	defer func() {
		if !ok { // leave nothing behind a failed start
			_ = devDown(context.Background(), io.Discard, dir, false)
		}
	}()
	hc := unixHTTPClient(DevAPISocket(dir))
	deadline := time.Now().Add(wait)
	for {
		if ok := readyz(ctx, hc); ok {
			break
		}
		if !pids.Serve.alive() {
			return fmt.Errorf("the coordinator exited; see %s:\n%s", filepath.Join(dir, devStateDir, "coordinator.log"),
				tail(filepath.Join(dir, devStateDir, "coordinator.log"), 15))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the coordinator was not ready within %s; see %s", wait, filepath.Join(dir, devStateDir, "coordinator.log"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(devPoll):
		}
	}
	if pids.Bridge != nil && !pids.Bridge.alive() {
		return fmt.Errorf("the API bridge on %s exited; see %s:\n%s", httpAddr, filepath.Join(dir, devStateDir, "bridge.log"),
			tail(filepath.Join(dir, devStateDir, "bridge.log"), 5))
	}
	token, err := os.ReadFile(filepath.Join(dir, devCoordinatorDir, "token"))
	if err != nil {
		return err
	}
	cl := client.New("http://oce-dev", strings.TrimSpace(string(token)), client.WithHTTPClient(hc))
	if _, err := cl.Namespace(ctx, DefaultNamespace); err != nil {
		if _, err := cl.CreateNamespace(ctx, DefaultNamespace); err != nil {
			return fmt.Errorf("create namespace %s: %w", DefaultNamespace, err)
		}
	}
	ok = true
	fmt.Fprintf(out, "oce dev is up: coordinator on %s (socket %s), data in %s\n", httpAddr, DevAPISocket(dir), dir)
	printNext(out, httpAddr, dir)
	return nil
}

func describeIsolation(namespaced, isolated, real bool) string {
	provider := "offline fake model provider"
	if real {
		provider = "real model provider"
	}
	switch {
	case namespaced:
		return "runtimes in a new loopback-only network namespace, " + provider
	case isolated:
		return "already inside a loopback-only network namespace, " + provider
	}
	return "HOST NETWORK (no isolation), " + provider
}

func printNext(w io.Writer, httpAddr, dir string) {
	server, down := "", ""
	if httpAddr != "127.0.0.1:7400" {
		server = " --server http://" + httpAddr
	}
	if wd, err := os.Getwd(); err != nil || filepath.Join(wd, DefaultDevDir) != dir {
		server += " --token-file " + filepath.Join(dir, devCoordinatorDir, "token")
		down = " --dir " + dir
	}
	fmt.Fprintf(w, `
Next:
  occ%[1]s config create chat -f scripts/demo/embedded.json   # a native OpenClaw configuration
  occ%[1]s agent create hello --config chat --auth-method api_key --auth-ref local:%[2]s
  occ%[1]s agent deploy hello --wait
  occ%[1]s agent send hello "Hello!"%[3]s
  occ dev down%[4]s    # stop everything (data stays; --purge removes it)
Or run the whole quickstart: make demo
`, server, DevDemoKey, sendDir(down), down)
}

func sendDir(down string) string {
	if down == "" {
		return ""
	}
	return down // agent send finds the route records in the dev dir
}

// startDetached starts cmd in its own session with output to logFile.
func startDetached(cmd *exec.Cmd, logFile string) (devPid, error) {
	lf, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return devPid{}, err
	}
	defer lf.Close()
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = lf, lf
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid = true
	if err := cmd.Start(); err != nil {
		return devPid{}, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	p := devPid{PID: cmd.Process.Pid}
	p.StartTime, _ = startTimeOf(p.PID)
	// Reap it if it dies while occ still runs; occ exits soon after.
	go func() { _ = cmd.Wait() }()
	return p, nil
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// unixHTTPClient dials every request to the Unix socket sock.
func unixHTTPClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
}

func readyz(ctx context.Context, hc *http.Client) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://oce-dev/readyz", nil)
	if err != nil {
		return false
	}
	res, err := hc.Do(req)
	if err != nil {
		return false
	}
	res.Body.Close()
	return res.StatusCode == http.StatusOK
}

func (a *app) devDownCmd() *cobra.Command {
	var dir string
	var purge bool
	c := &cobra.Command{
		Use:   "down",
		Short: "Stop everything `occ dev up` started (data stays unless --purge)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := a.devDir(dir)
			if err != nil {
				return err
			}
			return devDown(cmd.Context(), cmd.OutOrStdout(), d, purge)
		},
	}
	c.Flags().StringVar(&dir, "dir", "", "dev data dir (env OCC_DEV_DIR; default ./"+DefaultDevDir+")")
	c.Flags().BoolVar(&purge, "purge", false, "also remove the data dir")
	return c
}

func devDown(ctx context.Context, out io.Writer, dir string, purge bool) error {
	p, err := readPids(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err == nil {
		if p.Serve.alive() {
			fmt.Fprintln(out, "stopping the coordinator and every runtime it runs…")
			_ = syscall.Kill(p.Serve.PID, syscall.SIGTERM)
			if !waitGone(ctx, []devPid{p.Serve}, DevStopTimeout) {
				_ = syscall.Kill(p.Serve.PID, syscall.SIGKILL)
			}
		}
		if p.Bridge != nil && p.Bridge.alive() {
			_ = syscall.Kill(p.Bridge.PID, syscall.SIGTERM)
			if !waitGone(ctx, []devPid{*p.Bridge}, 5*time.Second) {
				_ = syscall.Kill(p.Bridge.PID, syscall.SIGKILL)
			}
		}
	}
	// Safety net: supervisors recorded by the local driver that outlived it.
	left := recordedRuntimePids(dir)
	for _, rp := range left {
		if rp.alive() {
			_ = syscall.Kill(rp.PID, syscall.SIGTERM)
		}
	}
	if !waitGone(ctx, left, 30*time.Second) {
		for _, rp := range left {
			if rp.alive() {
				_ = syscall.Kill(rp.PID, syscall.SIGKILL)
			}
		}
	}
	_ = os.Remove(filepath.Join(dir, devStateDir, devPidsFile))
	if purge {
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		fmt.Fprintf(out, "oce dev is down; removed %s\n", dir)
		return nil
	}
	fmt.Fprintf(out, "oce dev is down; data kept in %s (occ dev down --purge removes it)\n", dir)
	return nil
}

// recordedRuntimePids reads every revision's run.json under dir.
func recordedRuntimePids(dir string) []devPid {
	files, _ := filepath.Glob(filepath.Join(dir, "runtimes", "*", "*", "revisions", "*", "run.json"))
	var out []devPid
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var r struct {
			Gateway, Harness *devPid
		}
		if json.Unmarshal(b, &r) != nil {
			continue
		}
		for _, p := range []*devPid{r.Gateway, r.Harness} {
			if p != nil && p.PID > 0 {
				out = append(out, *p)
			}
		}
	}
	return out
}

func waitGone(ctx context.Context, ps []devPid, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		alive := false
		for _, p := range ps {
			if p.alive() {
				alive = true
			}
		}
		if !alive {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(devPoll):
		}
	}
}

func (a *app) devServeCmd() *cobra.Command {
	var cfg DevServeConfig
	c := &cobra.Command{
		Use:    "serve",
		Short:  "Run the dev coordinator in the foreground (what `occ dev up` starts)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := a.devDir(cfg.Dir)
			if err != nil {
				return err
			}
			cfg.Dir = d
			if cfg.BinDir == "" {
				self, err := os.Executable()
				if err != nil {
					return err
				}
				cfg.BinDir = filepath.Dir(self)
			}
			return RunDevCoordinator(cmd.Context(), cfg)
		},
	}
	f := c.Flags()
	f.StringVar(&cfg.Dir, "dir", "", "dev data dir")
	f.StringVar(&cfg.BinDir, "bin-dir", "", "directory of the oce binaries")
	f.StringVar(&cfg.RaftAddr, "raft-addr", "127.0.0.1:7300", "Raft address")
	f.StringVar(&cfg.HTTPAddr, "http-addr", "127.0.0.1:7400", "API address")
	f.StringVar(&cfg.FakeReply, "fake-reply", "", "fake provider reply")
	f.BoolVar(&cfg.RealProvider, "real-provider", false, "use the real model provider")
	f.BoolVar(&cfg.AllowHostNetwork, "allow-host-network", false, "allow runtimes on the host network")
	return c
}

func (a *app) devBridgeCmd() *cobra.Command {
	var listen, sock string
	c := &cobra.Command{
		Use:    "bridge",
		Short:  "Forward a host loopback address to the dev coordinator's Unix socket",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			go func() {
				<-cmd.Context().Done()
				ln.Close()
			}()
			return forward(ln, func() (net.Conn, error) { return net.Dial("unix", sock) })
		},
	}
	c.Flags().StringVar(&listen, "listen", "127.0.0.1:7400", "loopback address to serve")
	c.Flags().StringVar(&sock, "socket", "", "Unix socket to forward to")
	return c
}

// forward copies every accepted connection to a fresh dial until ln closes.
func forward(ln net.Listener, dial func() (net.Conn, error)) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go func() {
			defer c.Close()
			up, err := dial()
			if err != nil {
				return
			}
			defer up.Close()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
			go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
			<-done
		}()
	}
}

// registerDev adds `occ dev` to root and `occ agent send` to its agent command.
func (a *app) registerDev(root *cobra.Command) {
	dev := a.devCmd()
	dev.GroupID = "ops"
	root.AddCommand(dev)
	for _, c := range root.Commands() {
		if c.Name() == "agent" {
			c.AddCommand(a.sendCmd())
		}
	}
}
