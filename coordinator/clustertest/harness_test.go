package clustertest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"oce.dev/oce/shared/netns"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/certs"
	"oce.dev/oce/coordinator/client"
)

// binary is the coordinator built once by TestMain: the test build, which
// has the in-memory driver the members run with (--driver memory
// --memory-dir).
var binary string

// memoryDriverTag builds cmd/coordinator with the in-memory test driver
// (cmd/coordinator/memorydriver.go).
const memoryDriverTag = "memorydriver"

// binaryEnv names a prebuilt coordinator binary to run instead of building
// this tree's: benchmarks compare an older tree's binary with this one's,
// alternately and with the same harness (docs/PERFORMANCE.md).
const binaryEnv = "OCE_CLUSTERTEST_COORDINATOR"

// TestMain runs the suite in a PID namespace of its own (host network):
// however the binary ends, no coordinator it started outlives it.
func TestMain(m *testing.M) {
	netns.Main(netns.RunnerFunc(func() int { return run(m) }), netns.Options{HostNetwork: true})
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "oce-clustertest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	binary = filepath.Join(dir, "coordinator")
	if pre := os.Getenv(binaryEnv); pre != "" {
		binary = pre
		fmt.Fprintf(os.Stderr, "clustertest: running the coordinator binary %s (%s)\n", pre, binaryEnv)
	} else if out, err := exec.Command("go", "build", "-tags", memoryDriverTag, "-o", binary, "oce.dev/oce/cmd/coordinator").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build coordinator: %v\n%s", err, out)
		return 1
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	return code
}

// Waits of the harness; generous because the machine is shared.
const (
	clusterWait = 60 * time.Second
	pollEvery   = 20 * time.Millisecond
)

// node is one coordinator process.
type node struct {
	ID        string
	IP        string // every member gets its own loopback IP
	Dir       string
	RaftBind  string
	RaftAdv   string // the proxy's address when proxied, else RaftBind
	HTTPAddr  string
	HTTPAdv   string // the HTTP proxy's address when proxied: what members are told
	HTTPProxy *Proxy
	Join      string
	LogPath   string
	Proxy     *Proxy
	extraArgs []string

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{}
	lastExit int // exit code of the last process that ended (-1: by a signal)
}

// clients are a cluster's API clients per member, made once and shared, so
// their connections (and TLS sessions) are kept alive across calls as any
// long-lived client's are: a client per call would measure a TLS handshake
// per request, which no real caller pays.
type clients struct {
	mu    sync.Mutex
	byKey map[clientKey]*client.Client
}

type clientKey struct {
	addr  string
	probe bool
}

func (cs *clients) get(k clientKey, mk func() *client.Client) *client.Client {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cl, ok := cs.byKey[k]; ok {
		return cl
	}
	if cs.byKey == nil {
		cs.byKey = map[clientKey]*client.Client{}
	}
	cl := mk()
	cs.byKey[k] = cl
	return cl
}

// cluster is a set of coordinator processes sharing one token.
type cluster struct {
	t         testing.TB
	Nodes     []*node
	TokenFile string
	Token     string
	// CA is the cluster CA every member's certificate chains to; nil for an
	// --insecure cluster.
	CA  *x509.CertPool
	pki string // the CA and member certificates' directory
	// memoryDir holds the memory driver's runtime records, shared by every
	// member (--memory-dir): a new leader observes the runtimes its
	// predecessor started, as with a real cluster, instead of reporting
	// every Agent degraded.
	memoryDir string
	// applied is the highest index a converged() call has seen: a member
	// restarted since then has converged only once it replayed that far
	// (a node that has not yet replayed its log reports the empty state).
	applied uint64
	clients clients
}

// reservePort reserves a port on ip for a member to listen on, race-free,
// for as long as the test runs: a TCP socket bound to it with SO_REUSEADDR
// that never listens. The kernel never hands a reserved port to anyone
// binding port 0 (this process's proxies, another test binary's members, a
// wildcard listener), yet the member's own listener (Go's listeners set
// SO_REUSEADDR too) binds on top of the reservation; while the member is
// down the port refuses connections, as a dead member's does. Picking a free
// port and closing it again left a window in which another process could
// take it ("address already in use").
func reservePort(t testing.TB, ip string) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Close(fd) })
	require.NoError(t, syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1))
	sa := &syscall.SockaddrInet4{}
	copy(sa.Addr[:], net.ParseIP(ip).To4())
	require.NoError(t, syscall.Bind(fd, sa))
	bound, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	return net.JoinHostPort(ip, strconv.Itoa(bound.(*syscall.SockaddrInet4).Port))
}

type clusterOpts struct {
	insecure bool // plain HTTP and Raft (--insecure) instead of TLS
	size     int
	proxied  bool // a cuttable proxy in front of every Raft port
	// httpProxied puts a proxy in front of every HTTP port and advertises
	// it: followers forward writes to the leader through it.
	httpProxied bool
	args        []string // extra coordinator flags
	ipBase      int      // members use 127.0.0.<ipBase+i>
}

// newProxy starts a proxy to target on a port of ip the kernel picks: never
// one reserved for a member (reservePort).
func newProxy(t testing.TB, ip, target string) *Proxy {
	t.Helper()
	p, err := NewProxy(net.JoinHostPort(ip, "0"), target)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// startCluster starts size members: the first bootstraps, the others join
// through it; it returns once every member reports the full membership.
func startCluster(t testing.TB, o clusterOpts) *cluster {
	t.Helper()
	root := t.TempDir()
	c := &cluster{t: t, TokenFile: filepath.Join(root, "token"), Token: "test-token-" + strings.Repeat("x", 20),
		memoryDir: filepath.Join(root, "memory")}
	require.NoError(t, os.WriteFile(c.TokenFile, []byte(c.Token+"\n"), 0o600))
	if o.ipBase == 0 {
		o.ipBase = 40
	}
	if !o.insecure {
		c.pki = filepath.Join(root, "pki")
		c.CA = makePKI(t, c.pki, o.size, o.ipBase)
	}
	for i := 1; i <= o.size; i++ {
		ip := fmt.Sprintf("127.0.0.%d", o.ipBase+i)
		n := &node{ID: fmt.Sprintf("n%d", i), IP: ip, Dir: filepath.Join(root, fmt.Sprintf("n%d", i)),
			RaftBind: reservePort(t, ip), HTTPAddr: reservePort(t, ip), extraArgs: o.args}
		n.RaftAdv = n.RaftBind
		n.LogPath = filepath.Join(root, n.ID+".log")
		if o.proxied {
			n.Proxy = newProxy(t, ip, n.RaftBind)
			n.RaftAdv = n.Proxy.Addr()
		}
		if o.httpProxied {
			n.HTTPProxy = newProxy(t, ip, n.HTTPAddr)
			n.HTTPAdv = n.HTTPProxy.Addr()
		}
		if i > 1 {
			n.Join = c.Nodes[0].HTTPAddr
		}
		c.Nodes = append(c.Nodes, n)
	}
	t.Cleanup(func() {
		if t.Failed() {
			// a member that seems stuck says where: SIGQUIT makes the Go
			// runtime write every goroutine's stack to its log
			for _, n := range c.Nodes {
				n.dumpGoroutines()
			}
		}
		for _, n := range c.Nodes {
			n.kill()
		}
		if t.Failed() {
			for _, n := range c.Nodes {
				b, _ := os.ReadFile(n.LogPath)
				log, dump, _ := strings.Cut(string(b), "\nSIGQUIT: quit")
				lines := strings.Split(strings.TrimSpace(log), "\n")
				if len(lines) > 40 {
					lines = lines[len(lines)-40:]
				}
				t.Logf("--- %s log tail ---\n%s", n.ID, strings.Join(lines, "\n"))
				if dump != "" {
					t.Logf("--- %s goroutines at the failure (SIGQUIT) ---\n%s", n.ID, goroutinesOfInterest(dump))
				}
			}
		}
	})
	c.start(c.Nodes[0])
	c.waitLeader(c.Nodes[:1])
	for _, n := range c.Nodes[1:] {
		c.start(n)
	}
	c.waitMembers(c.Nodes)
	return c
}

func (c *cluster) start(n *node) {
	c.t.Helper()
	args := []string{"--data-dir", n.Dir, "--node-id", n.ID, "--raft-addr", n.RaftBind, "--raft-advertise", n.RaftAdv,
		"--http-addr", n.HTTPAddr, "--token-file", c.TokenFile, "--memory-dir", c.memoryDir}
	if n.Join != "" {
		args = append(args, "--join", n.Join)
	}
	if c.CA == nil {
		args = append(args, "--insecure")
	} else {
		args = append(args, "--tls-ca", filepath.Join(c.pki, "ca.crt"), "--tls-cert", filepath.Join(c.pki, n.ID+".crt"),
			"--tls-key", filepath.Join(c.pki, n.ID+".key"))
	}
	if n.HTTPAdv != "" {
		args = append(args, "--http-advertise", n.HTTPAdv)
	}
	args = append(args, n.extraArgs...)
	logf, err := os.OpenFile(n.LogPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	require.NoError(c.t, err)
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + n.Dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(c.t, cmd.Start())
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		n.mu.Lock()
		n.lastExit = cmd.ProcessState.ExitCode()
		n.mu.Unlock()
		close(done)
	}()
	n.mu.Lock()
	n.cmd, n.done = cmd, done
	n.mu.Unlock()
}

// kill SIGKILLs the process and waits for it.
func (n *node) kill() { n.signal(syscall.SIGKILL) }

// stop SIGTERMs the process and waits for it.
func (n *node) stop() { n.signal(syscall.SIGTERM) }

func (n *node) signal(sig syscall.Signal) {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.cmd = nil
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	<-done
}

// dumpGoroutines SIGQUITs the process (the Go runtime writes every
// goroutine's stack to its log and exits) and waits for it a while; kill
// follows either way.
func (n *node) dumpGoroutines() {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
}

func (n *node) exitCode() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lastExit
}

func (n *node) running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil
}

// info is the part of GET /v1/cluster the tests read.
func (c *cluster) info(ctx context.Context, n *node) (wire.Cluster, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return c.client(n).Cluster(ctx)
}

// client is the shared client of member n with the cluster's token.
func (c *cluster) client(n *node) *client.Client {
	return c.clients.get(clientKey{addr: n.HTTPAddr}, func() *client.Client {
		return c.clientTo(n.HTTPAddr, c.Token, &http.Client{Timeout: 10 * time.Second})
	})
}

// clientTo is a client of addr with token, trusting the cluster CA.
func (c *cluster) clientTo(addr, token string, hc *http.Client, extra ...client.Option) *client.Client {
	opts := append([]client.Option{client.WithHTTPClient(hc)}, extra...)
	if c.CA != nil {
		opts = append(opts, client.WithCA(c.CA))
	}
	return client.New(addr, token, opts...)
}

// httpClient is a plain HTTP client that trusts the cluster CA, and the
// scheme of the members' API.
func (c *cluster) httpClient() (*http.Client, string) {
	if c.CA == nil {
		return http.DefaultClient, "http://"
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: c.CA}}}, "https://"
}

// makePKI writes a cluster CA and one certificate per member (n1…, naming
// its loopback IP) into dir.
func makePKI(t testing.TB, dir string, size, ipBase int) *x509.CertPool {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o700))
	now := time.Now()
	caPEM, caKey, err := certs.NewCA("clustertest CA", now)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ca.crt"), caPEM, 0o644))
	for i := 1; i <= size+2; i++ { // spare certificates for members added later
		crt, key, err := certs.Issue(caPEM, caKey, fmt.Sprintf("n%d", i),
			[]string{fmt.Sprintf("127.0.0.%d", ipBase+i), "localhost"}, now, time.Hour*24)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("n%d.crt", i)), crt, 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("n%d.key", i)), key, 0o600))
	}
	pool, err := certs.LoadPool(filepath.Join(dir, "ca.crt"))
	require.NoError(t, err)
	return pool
}

// probe is a client that sends each call once: the benchmarks retry
// themselves, every few milliseconds and across members, so what they
// measure is the cluster, not the client's backoff.
func (c *cluster) probe(n *node) *client.Client {
	return c.clients.get(clientKey{addr: n.HTTPAddr, probe: true}, func() *client.Client {
		return c.clientTo(n.HTTPAddr, c.Token, &http.Client{Timeout: 10 * time.Second}, client.WithRetry(client.Retry{}))
	})
}

// waitLeader waits until every running node among ns names the same leader,
// which is one of them, and returns it.
func (c *cluster) waitLeader(ns []*node) *node {
	c.t.Helper()
	var leader *node
	require.Eventually(c.t, func() bool {
		leader = nil
		id := ""
		for _, n := range ns {
			if !n.running() {
				continue
			}
			info, err := c.info(context.Background(), n)
			if err != nil || info.LeaderID == "" || (id != "" && info.LeaderID != id) {
				return false
			}
			id = info.LeaderID
		}
		for _, n := range ns {
			if n.ID == id {
				leader = n
			}
		}
		return leader != nil
	}, clusterWait, pollEvery, "no agreed leader")
	return leader
}

// waitMembers waits until every node reports all of ns as voters with HTTP
// addresses, under one leader.
func (c *cluster) waitMembers(ns []*node) *node {
	c.t.Helper()
	require.Eventually(c.t, func() bool {
		for _, n := range ns {
			info, err := c.info(context.Background(), n)
			if err != nil || info.LeaderID == "" || len(info.Members) != len(ns) {
				return false
			}
			for _, m := range info.Members {
				if m.HTTPAddr == "" || m.Suffrage != "voter" {
					return false
				}
			}
		}
		return true
	}, clusterWait, pollEvery, "members did not converge")
	return c.waitLeader(ns)
}

// converged waits until the leader among ns is quiescent (its engine
// writes nothing more until a request or a changed observation: no open
// work, no owed finalization, a whole health round over the current state)
// and every node in ns reports the same lastApplied and digest, and returns
// the digest: the settled state, not a moment between background writes.
func (c *cluster) converged(ns []*node) string {
	c.t.Helper()
	var digest string
	var idx uint64
	require.Eventually(c.t, func() bool {
		idx = 0
		digest = ""
		quiet := false
		for i, n := range ns {
			info, err := c.info(context.Background(), n)
			if err != nil {
				return false
			}
			if info.LastApplied < c.applied {
				return false
			}
			quiet = quiet || (info.State == "Leader" && info.Quiescent)
			if i == 0 {
				idx, digest = info.LastApplied, info.Digest
			} else if info.LastApplied != idx || info.Digest != digest {
				return false
			}
		}
		return quiet && digest != ""
	}, clusterWait, pollEvery, "state did not converge to a quiescent leader")
	if idx > c.applied {
		c.applied = idx
	}
	return digest
}

func (c *cluster) nodeByID(id string) *node {
	for _, n := range c.Nodes {
		if n.ID == id {
			return n
		}
	}
	c.t.Fatalf("no node %s", id)
	return nil
}

// followerOf returns a member other than leader (the last one).
func (c *cluster) followerOf(leader *node) *node {
	var f *node
	for _, n := range c.Nodes {
		if n != leader {
			f = n
		}
	}
	return f
}

// isolate cuts n off from every other member, both directions.
func (c *cluster) isolate(n *node) {
	n.Proxy.Cut()
	for _, o := range c.Nodes {
		if o != n {
			o.Proxy.Block(n.IP)
		}
	}
}

// heal undoes isolate.
func (c *cluster) heal() {
	for _, o := range c.Nodes {
		o.Proxy.Heal()
	}
}

// logged reports whether the member's log has a record whose msg is msg.
func (n *node) logged(t testing.TB, msg string) bool {
	t.Helper()
	b, err := os.ReadFile(n.LogPath)
	require.NoError(t, err)
	return strings.Contains(string(b), `"msg":"`+msg+`"`)
}

// loggedWork returns the "work" field of every record of the member's log
// whose msg is msg.
func (n *node) loggedWork(t testing.TB, msg string) []string {
	t.Helper()
	b, err := os.ReadFile(n.LogPath)
	require.NoError(t, err)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		var rec struct {
			Msg  string `json:"msg"`
			Work string `json:"work"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == msg && rec.Work != "" {
			out = append(out, rec.Work)
		}
	}
	return out
}

// goroutinesOfInterest keeps, of a SIGQUIT dump, the goroutines running
// oce's own code (the runtime's, net/http's idle ones and raft's are many
// and rarely where a test is stuck), so a failure's log says where the
// member waited.
func goroutinesOfInterest(dump string) string {
	var keep []string
	for _, g := range strings.Split(dump, "\n\n") {
		if strings.Contains(g, "oce.dev/oce/coordinator/engine") || strings.Contains(g, "oce.dev/oce/coordinator/store") ||
			strings.Contains(g, "oce.dev/oce/coordinator/api") || strings.Contains(g, "sync.(*Mutex)") || strings.Contains(g, "sync.(*RWMutex)") {
			keep = append(keep, g)
		}
	}
	return strings.Join(keep, "\n\n")
}
