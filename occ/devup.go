package occ

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
	"oce.dev/oce/shared/atomicfile"
	"oce.dev/oce/shared/netns"
	"oce.dev/oce/shared/proc"
	"oce.dev/oce/shared/runtimes"
	"oce.dev/oce/shared/supervise"
)

// devUpOptions are the flags of `occ dev up`.
type devUpOptions struct {
	dir, binDir, httpAddr, reply string
	allowHost                    bool
	wait                         time.Duration
}

// realKeys are the provider keys that select the real provider, and the
// secret files (.oce/secrets/…) they are written to.
var realKeys = []struct{ env, file string }{{"OPENAI_API_KEY", "openai-api-key"}, {"ANTHROPIC_API_KEY", "anthropic-api-key"}}

// devBinaries are what `occ dev up` needs in the bin dir: what it starts
// and what the local driver starts.
var devBinaries = []string{"coordinator", "fakeprovider", "gatewayd", "harnessd", "nodehost"}

// devStart is one run of `occ dev up`, a step per phase.
type devStart struct {
	a   *app
	o   devUpOptions
	out io.Writer

	self        string // this occ executable (the bridge runs it)
	real        bool   // a real provider key is set
	isolated    bool   // this process already runs in a loopback-only namespace
	namespaced  bool   // the coordinator gets a namespace of its own
	providerURL string
	token       string
	pids        devPids
}

func (a *app) devUp(cmd *cobra.Command, o devUpOptions) error {
	s := &devStart{a: a, o: o, out: cmd.OutOrStdout()}
	if p, err := readPids(o.dir); err == nil && p.Coordinator.Alive() {
		fmt.Fprintf(s.out, "oce dev is already running (pid %d, data in %s)\n", p.Coordinator.PID, o.dir)
		printNext(s.out, p.HTTPAddr, o.dir)
		return nil
	}
	ok := false
	defer func() {
		if !ok && (s.pids.Coordinator != nil || s.pids.Provider != nil) { // leave nothing behind a failed start
			_ = devDown(context.Background(), io.Discard, o.dir, false)
		}
	}()
	ctx := cmd.Context()
	for _, step := range []func(context.Context) error{
		s.checkProvider,    // refuse before anything changes
		s.prepare,          // dirs, runtimes, binaries, secrets
		s.startProvider,    // the offline fake provider (holds the namespace)
		s.startCoordinator, // coordinator --driver local
		s.startBridge,      // host address → API socket
		s.waitReady,
		s.defaultNamespace,
		s.defaultCredentials, // the demo or provider keys, sources of the default namespace
	} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	ok = true
	fmt.Fprintf(s.out, "oce dev is up: coordinator on %s (socket %s), data in %s\n", o.httpAddr, DevAPISocket(o.dir), o.dir)
	printNext(s.out, o.httpAddr, o.dir)
	return nil
}

func (s *devStart) path(parts ...string) string {
	return filepath.Join(append([]string{s.o.dir}, parts...)...)
}

// checkProvider refuses a real provider without host networking.
func (s *devStart) checkProvider(context.Context) error {
	for _, k := range realKeys {
		s.real = s.real || s.a.opts.Getenv(k.env) != ""
	}
	if s.real && !s.o.allowHost {
		return usageError(errors.New("OPENAI_API_KEY/ANTHROPIC_API_KEY is set: the real provider needs the host network, " +
			"so the runtimes cannot be isolated; pass --allow-host-network to accept that, or unset the keys for the offline fake provider"))
	}
	s.isolated = netns.Isolated() == nil
	s.namespaced = !s.isolated && !s.o.allowHost
	return nil
}

// prepare makes the dev dirs, installs the runtimes, finds the binaries and
// writes the provider secrets.
func (s *devStart) prepare(ctx context.Context) error {
	for _, d := range []string{s.o.dir, s.path(devStateDir), s.path(devSecretsDir), s.path(devCoordinatorDir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	fmt.Fprintln(s.out, "checking the pinned runtimes (installing when missing)…")
	if _, err := runtimes.Ensure(ctx); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	s.self = self
	if s.o.binDir == "" {
		s.o.binDir = filepath.Dir(self)
	}
	for _, b := range devBinaries {
		if _, err := os.Stat(filepath.Join(s.o.binDir, b)); err != nil {
			return fmt.Errorf("%s not found in %s: run `make build` (or pass --bin-dir)", b, s.o.binDir)
		}
	}
	for _, k := range realKeys {
		if v := s.a.opts.Getenv(k.env); v != "" {
			if err := atomicfile.Write(s.path(devSecretsDir, k.file), []byte(v), 0o600); err != nil {
				return err
			}
		}
	}
	return nil
}

// detached prepares cmd to outlive occ: its own session, no stdin, a
// minimal environment (never this shell's provider keys). The coordinator's
// activation order (OCE_CREDENTIAL_CHECK) is the one setting passed on.
func detached(cmd *exec.Cmd) *exec.Cmd {
	cmd.Stdin = nil
	cmd.Env = supervise.MinimalEnv("PATH", "HOME", "XDG_CACHE_HOME", "LANG", "GOCOVERDIR", "OCE_CREDENTIAL_CHECK")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return cmd
}

// startProvider starts the offline fake provider accepting the demo key
// (created on first use) and reads its port. When the dev environment gets
// a network namespace of its own, the provider creates it (a private /tmp
// too, unless the data dir or the binaries live under /tmp) and the
// coordinator joins it.
func (s *devStart) startProvider(context.Context) error {
	if s.real {
		return nil
	}
	key := s.path(devSecretsDir, DevDemoKey)
	if _, err := os.Stat(key); errors.Is(err, os.ErrNotExist) {
		if err := atomicfile.Write(key, []byte("sk-oce-dev-"+randomToken()+"\n"), 0o600); err != nil {
			return err
		}
	}
	k, err := os.ReadFile(key)
	if err != nil {
		return err
	}
	keys := s.path(devStateDir, devProviderKeyFile)
	if err := atomicfile.Write(keys, k, 0o600); err != nil {
		return err
	}
	bin := filepath.Join(s.o.binDir, "fakeprovider")
	args := []string{"--valid-key-file", keys}
	if !s.namespaced {
		// Sharing a network namespace with others: a port of our choosing,
		// never the one the caller reserved for the API.
		addr, err := freeLoopback(s.o.httpAddr)
		if err != nil {
			return err
		}
		args = append(args, "--addr", addr)
	}
	if s.o.reply != "" {
		args = append(args, "--reply", s.o.reply)
	}
	cmd := exec.Command(bin, args...)
	if s.namespaced {
		underTmp := false
		for _, p := range []string{s.o.dir, s.self, s.o.binDir} {
			underTmp = underTmp || strings.HasPrefix(p, "/tmp/")
		}
		if cmd, err = netns.Command(netns.Options{PrivateTmp: !underTmp}, bin, args...); err != nil {
			return fmt.Errorf("%w; pass --allow-host-network to run without isolation", err)
		}
	}
	logFile := s.path(devStateDir, "fakeprovider.log")
	_ = os.Remove(logFile) // the port line of this start, not an earlier one
	p, err := proc.Start(detached(cmd), "fakeprovider", logFile)
	if err != nil {
		return err
	}
	s.pids.Provider = p
	if err := s.savePids(); err != nil {
		return err
	}
	port, err := waitPortLine(p, logFile, DevProviderTimeout)
	if err != nil {
		return err
	}
	s.providerURL = "http://127.0.0.1:" + port
	return nil
}

// freeLoopback returns a loopback address free now whose port none of
// taken (addresses the caller reserved but may not have bound yet) uses.
func freeLoopback(taken ...string) (string, error) {
	busy := map[string]bool{}
	for _, t := range taken {
		if _, port, err := net.SplitHostPort(t); err == nil {
			busy[port] = true
		}
	}
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for range 16 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		held = append(held, ln) // held until chosen, so a retry gets another port
		if _, port, _ := net.SplitHostPort(ln.Addr().String()); !busy[port] {
			return ln.Addr().String(), nil
		}
	}
	return "", errors.New("no free loopback port")
}

// waitPortLine waits for the fake provider's "PORT n" line in its log.
func waitPortLine(p *proc.Process, logFile string, wait time.Duration) (string, error) {
	deadline := time.Now().Add(wait)
	for {
		if f, err := os.Open(logFile); err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if port, ok := strings.CutPrefix(sc.Text(), "PORT "); ok {
					f.Close()
					return port, nil
				}
			}
			f.Close()
		}
		if !p.Alive() {
			return "", fmt.Errorf("the fake provider exited; see %s:\n%s", logFile, tail(logFile, 10))
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the fake provider printed no port within %s; see %s", wait, logFile)
		}
		time.Sleep(devPoll)
	}
}

// startCoordinator starts `coordinator --driver local` on the dev layout:
// Raft, token and API socket in coordinator/, the runtimes under the dev
// root, the files in secrets/ that `occ dev up` registers as the default
// Namespace's credential sources.
func (s *devStart) startCoordinator(context.Context) error {
	httpAddr, raftAddr := s.o.httpAddr, devInnerRaftAddr
	if s.namespaced {
		httpAddr = devInnerHTTPAddr // the bridge serves s.o.httpAddr on the host
	} else {
		// Sharing a network namespace with others (tests, host network):
		// a free port rather than the fixed one.
		var err error
		if raftAddr, err = freeLoopback(s.o.httpAddr, strings.TrimPrefix(s.providerURL, "http://")); err != nil {
			return err
		}
	}
	bin := filepath.Join(s.o.binDir, "coordinator")
	args := []string{"--driver", "local", "--node-id", "dev",
		"--data-dir", s.path(devCoordinatorDir), "--api-socket", DevAPISocket(s.o.dir),
		"--http-addr", httpAddr, "--raft-addr", raftAddr,
		"--local-root", s.o.dir, "--local-secrets-dir", s.path(devSecretsDir), "--local-bin-dir", s.o.binDir}
	if s.providerURL != "" {
		args = append(args, "--local-provider-url", s.providerURL)
	}
	if s.o.allowHost {
		args = append(args, "--local-allow-host-network")
	}
	cmd := exec.Command(bin, args...)
	if s.namespaced {
		var err error
		if cmd, err = netns.EnterCommand(s.pids.Provider.PID, bin, args...); err != nil {
			return err
		}
	}
	p, err := proc.Start(detached(cmd), "coordinator", s.path(devStateDir, "coordinator.log"))
	if err != nil {
		return err
	}
	s.pids.Coordinator = p
	s.pids.Namespaced, s.pids.HTTPAddr = s.namespaced, s.o.httpAddr
	fmt.Fprintf(s.out, "starting the coordinator (%s)…\n", describeIsolation(s.namespaced, s.isolated, s.real))
	return s.savePids()
}

// startBridge serves the host address for a namespaced coordinator.
func (s *devStart) startBridge(context.Context) error {
	if !s.namespaced {
		return nil
	}
	cmd := exec.Command(s.self, "dev", "bridge", "--listen", s.o.httpAddr, "--socket", DevAPISocket(s.o.dir))
	p, err := proc.Start(detached(cmd), "bridge", s.path(devStateDir, "bridge.log"))
	if err != nil {
		return err
	}
	s.pids.Bridge = p
	return s.savePids()
}

func (s *devStart) savePids() error {
	b, err := json.MarshalIndent(s.pids, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(s.path(devStateDir, devPidsFile), b, 0o600)
}

// waitReady polls the API socket until the coordinator is ready.
func (s *devStart) waitReady(ctx context.Context) error {
	logFile := s.path(devStateDir, "coordinator.log")
	deadline := time.Now().Add(s.o.wait)
	for {
		// The coordinator writes its CA before it listens.
		cl, err := s.devClient("")
		if err == nil {
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			err = cl.Ready(rctx)
			cancel()
		}
		if err == nil {
			break
		}
		if !s.pids.Coordinator.Alive() {
			return fmt.Errorf("the coordinator exited; see %s:\n%s", logFile, tail(logFile, 15))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the coordinator was not ready within %s; see %s", s.o.wait, logFile)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(devPoll):
		}
	}
	if s.pids.Bridge != nil && !s.pids.Bridge.Alive() {
		log := s.path(devStateDir, "bridge.log")
		return fmt.Errorf("the API bridge on %s exited; see %s:\n%s", s.o.httpAddr, log, tail(log, 5))
	}
	token, err := os.ReadFile(s.path(devCoordinatorDir, "token"))
	if err != nil {
		return err
	}
	s.token = strings.TrimSpace(string(token))
	return nil
}

// defaultNamespace creates the default Namespace once.
func (s *devStart) defaultNamespace(ctx context.Context) error {
	cl, err := s.devClient(s.token)
	if err != nil {
		return err
	}
	if _, err := cl.Namespace(ctx, DefaultNamespace); err == nil {
		return nil
	}
	if _, err := cl.CreateNamespace(ctx, DefaultNamespace); err != nil {
		return fmt.Errorf("create namespace %s: %w", DefaultNamespace, err)
	}
	return nil
}

// defaultCredentials registers the keys of the secrets directory (the demo
// key, or the real providers' keys) as credential sources of the default
// Namespace, once: Agents there reference them as credential:demo-key (or
// local:demo-key, the spelling of earlier releases). Other Namespaces get
// their own with occ credential create.
func (s *devStart) defaultCredentials(ctx context.Context) error {
	cl, err := s.devClient(s.token)
	if err != nil {
		return err
	}
	files := []string{DevDemoKey}
	for _, k := range realKeys {
		files = append(files, k.file)
	}
	for _, f := range files {
		if _, err := os.Stat(s.path(devSecretsDir, f)); err != nil {
			continue
		}
		if _, err := cl.CredentialSource(ctx, DefaultNamespace, f); err == nil {
			continue
		}
		if _, err := cl.CreateCredentialSource(ctx, DefaultNamespace, wire.CreateCredentialSource{Name: f, From: "local:" + f}); err != nil {
			return fmt.Errorf("register credential %s in namespace %s: %w", f, DefaultNamespace, err)
		}
	}
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
	if httpAddr != devInnerHTTPAddr {
		server = " --server https://" + httpAddr
	}
	if wd, err := os.Getwd(); err != nil || filepath.Join(wd, DefaultDevDir) != dir {
		server += " --token-file " + filepath.Join(dir, devCoordinatorDir, "token") +
			" --ca-file " + filepath.Join(dir, devCoordinatorDir, "tls", "ca.crt")
		down = " --dir " + dir
	}
	fmt.Fprintf(w, `
Next:
  occ%[1]s config create chat -f scripts/demo/embedded.json   # a native OpenClaw configuration
  occ%[1]s agent create hello --config chat --auth-method api_key --auth-ref credential:%[2]s
  occ%[1]s agent deploy hello --wait
  occ%[1]s agent send hello "Hello!"
  occ dev down%[3]s    # stop everything (data stays; --purge removes it)
Or run the whole quickstart: make demo
`, server, DevDemoKey, down)
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

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// devClient is a client of the dev coordinator's API socket, trusting the
// CA the coordinator made in its data dir (it serves TLS by default).
func (s *devStart) devClient(token string) (*client.Client, error) {
	pool, err := client.LoadCA(s.path(devCoordinatorDir, "tls", "ca.crt"))
	if err != nil {
		return nil, err
	}
	return client.New("unix://"+DevAPISocket(s.o.dir), token, client.WithCA(pool)), nil
}
