package monitoring

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/certs"
	"oce.dev/oce/coordinator/client"
	"oce.dev/oce/shared/netns"
)

// TestMain runs the package in a PID namespace of its own (host network, so
// scripts/promtool.sh reaches the module proxy when it must build): however
// the test binary ends, no coordinator it started outlives it.
func TestMain(m *testing.M) {
	netns.Main(m, netns.Options{HostNetwork: true})
}

// How the leader-loss test maps its scrapes onto Prometheus's time.
const (
	// roundsBefore scrape rounds with a leader, then the kill, then
	// roundsAfter rounds: enough for OceCoordinatorDown's 5 minutes at the
	// ServiceMonitor's 30 s interval, and a few more.
	roundsBefore = 4
	roundsAfter  = 14
	// scrapeEvery paces the real scrapes: the rounds after the kill span
	// 7 s, over 15 of the members' 400 ms election timeouts, in which the
	// survivor would have been elected if it could.
	scrapeEvery = 500 * time.Millisecond
	// memberWait bounds a member's start, a join, a replicated write.
	memberWait = 60 * time.Second
	// targetNamespace is the Kubernetes namespace of the install bundle: the
	// namespace label Prometheus gives a member's series.
	targetNamespace = "oce-system"
)

// member is one coordinator process of the test cluster.
type member struct {
	id, pod      string
	ip           string
	raft, http   string
	dir, logPath string
	cmd          *exec.Cmd
	done         chan struct{}
	alive        bool
}

// testCluster is three coordinator processes over real TCP and TLS, the
// memory driver shared through one directory, one admin token file.
type testCluster struct {
	t         *testing.T
	binary    string
	root, pki string
	tokenFile string
	token     string
	ca        *x509.CertPool
	members   []*member
}

// buildCoordinator builds cmd/coordinator with the memory driver (as
// coordinator/clustertest does) into a temporary directory.
func buildCoordinator(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "coordinator")
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	b, err := exec.CommandContext(ctx, "go", "build", "-tags", "memorydriver", "-o", out, "oce.dev/oce/cmd/coordinator").CombinedOutput()
	require.NoError(t, err, "build coordinator: %s", b)
	return out
}

// reservePort binds a socket to a kernel-chosen port of ip and keeps it
// (SO_REUSEADDR, never listening) so no other process takes the port; the
// member binds on top of it, and once it is killed the port refuses, as a
// dead member's does (coordinator/clustertest does the same).
func reservePort(t *testing.T, ip string) string {
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

func startTestCluster(t *testing.T, binary string, size int) *testCluster {
	t.Helper()
	root := t.TempDir()
	tok := make([]byte, 24)
	_, err := rand.Read(tok)
	require.NoError(t, err)
	c := &testCluster{t: t, binary: binary, root: root, pki: filepath.Join(root, "pki"),
		tokenFile: filepath.Join(root, "token"), token: hex.EncodeToString(tok)}
	require.NoError(t, os.WriteFile(c.tokenFile, []byte(c.token+"\n"), 0o600))

	require.NoError(t, os.MkdirAll(c.pki, 0o700))
	now := time.Now()
	caPEM, caKey, err := certs.NewCA("monitoring test CA", now)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(c.pki, "ca.crt"), caPEM, 0o644))
	c.ca, err = certs.LoadPool(filepath.Join(c.pki, "ca.crt"))
	require.NoError(t, err)
	for i := range size {
		m := &member{id: fmt.Sprintf("n%d", i+1), pod: fmt.Sprintf("oce-coordinator-%d", i),
			ip: fmt.Sprintf("127.0.0.%d", 91+i)}
		m.raft, m.http = reservePort(t, m.ip), reservePort(t, m.ip)
		m.dir, m.logPath = filepath.Join(root, m.id), filepath.Join(root, m.id+".log")
		crt, key, err := certs.Issue(caPEM, caKey, m.id, []string{m.ip, "localhost"}, now, 24*time.Hour)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(c.pki, m.id+".crt"), crt, 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(c.pki, m.id+".key"), key, 0o600))
		c.members = append(c.members, m)
	}
	t.Cleanup(func() {
		for _, m := range c.members {
			c.kill(m)
		}
		if t.Failed() {
			for _, m := range c.members {
				b, _ := os.ReadFile(m.logPath)
				lines := strings.Split(strings.TrimSpace(string(b)), "\n")
				lines = lines[max(0, len(lines)-30):]
				t.Logf("--- %s log tail ---\n%s", m.id, strings.Join(lines, "\n"))
			}
		}
	})

	c.start(c.members[0], "")
	c.waitCluster(c.members[:1])
	for _, m := range c.members[1:] {
		c.start(m, c.members[0].http)
	}
	c.waitCluster(c.members)
	return c
}

func (c *testCluster) start(m *member, join string) {
	c.t.Helper()
	args := []string{"--data-dir", m.dir, "--node-id", m.id, "--raft-addr", m.raft, "--raft-advertise", m.raft,
		"--http-addr", m.http, "--token-file", c.tokenFile, "--memory-dir", filepath.Join(c.root, "memory"),
		"--tls-ca", filepath.Join(c.pki, "ca.crt"), "--tls-cert", filepath.Join(c.pki, m.id+".crt"),
		"--tls-key", filepath.Join(c.pki, m.id+".key")}
	if join != "" {
		args = append(args, "--join", join)
	}
	logf, err := os.OpenFile(m.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	require.NoError(c.t, err)
	cmd := exec.Command(c.binary, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + m.dir}
	require.NoError(c.t, cmd.Start())
	m.cmd, m.done, m.alive = cmd, make(chan struct{}), true
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(m.done)
	}()
}

// kill SIGKILLs a member and waits for its end.
func (c *testCluster) kill(m *member) {
	if m.cmd == nil || !m.alive {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	<-m.done
	m.alive = false
}

func (c *testCluster) client(m *member) *client.Client {
	// WithCA sets up the transport of the client WithHTTPClient gives.
	return client.New(m.http, c.token, client.WithHTTPClient(&http.Client{Timeout: 5 * time.Second}), client.WithCA(c.ca))
}

// waitCluster waits until every member of ms reports all of ms as voters
// under one leader.
func (c *testCluster) waitCluster(ms []*member) {
	c.t.Helper()
	var last any
	require.Eventually(c.t, func() bool {
		leader := ""
		for _, m := range ms {
			info, err := c.client(m).Cluster(c.t.Context())
			last = info
			if err != nil {
				last = err
			}
			if err != nil || info.LeaderID == "" || (leader != "" && info.LeaderID != leader) || len(info.Members) != len(ms) {
				return false
			}
			leader = info.LeaderID
			for _, mb := range info.Members {
				if mb.Suffrage != "voter" {
					return false
				}
			}
		}
		return true
	}, memberWait, 20*time.Millisecond, "the cluster did not form: %+v", &last)
}

// metricsToken mints a metrics-reader's token (docs/OPERATIONS.md
// "Monitoring"), the identity of the ServiceMonitor's scrapes.
func (c *testCluster) metricsToken() string {
	c.t.Helper()
	cl := c.client(c.members[0])
	ctx := c.t.Context()
	_, err := cl.CreateUser(ctx, wire.CreateUser{Name: "prometheus"})
	require.NoError(c.t, err)
	_, err = cl.CreateRoleBinding(ctx, wire.CreateRoleBinding{Role: wire.RoleMetricsReader,
		Subject: wire.Subject{Kind: wire.PrincipalUser, Name: "prometheus"}})
	require.NoError(c.t, err)
	minted, err := cl.CreateToken(ctx, wire.CreateToken{User: "prometheus"})
	require.NoError(c.t, err)
	return minted.Token
}

// scraper reads members' /metrics as the ServiceMonitor's endpoint does:
// HTTPS checked against the cluster CA, the metrics-reader's bearer token,
// a scrape timeout.
type scraper struct {
	hc    *http.Client
	token string
}

func (s scraper) scrape(ctx context.Context, m *member) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+m.http+"/metrics", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	res, err := s.hc.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return "", err
	}
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", res.Status, bytes.TrimSpace(b))
	}
	return string(b), nil
}

// sample is one exposed sample with its labels.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

var expoLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})?\s+(\S+)`)

// parseSamples reads the samples of a text exposition.
func parseSamples(t *testing.T, body string) []sample {
	t.Helper()
	var out []sample
	for _, line := range strings.Split(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := expoLine.FindStringSubmatch(line)
		require.NotNil(t, m, "an exposition line: %q", line)
		v, err := strconv.ParseFloat(m[3], 64)
		require.NoError(t, err, line)
		s := sample{name: m[1], labels: map[string]string{}, value: v}
		for _, l := range sampleLabel.FindAllStringSubmatch(m[2], -1) {
			val, err := strconv.Unquote(`"` + l[2] + `"`)
			require.NoError(t, err, line)
			s.labels[l[1]] = val
		}
		out = append(out, s)
	}
	return out
}

// seriesKey is a series in PromQL selector syntax, labels sorted.
func seriesKey(name string, labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strconv.Quote(labels[k])
	}
	return name + "{" + strings.Join(parts, ", ") + "}"
}

// targetLabelsOf are the labels Prometheus gives member m's target under
// the ServiceMonitor (its job is the Service's name).
func targetLabelsOf(m *member) map[string]string {
	return map[string]string{"job": apiService, "namespace": targetNamespace, "pod": m.pod, "instance": m.http,
		"service": apiService, "endpoint": "http"}
}

// round is one scrape of every member: the series Prometheus would store.
type round struct {
	up     map[string]bool    // pod → scraped
	series map[string]float64 // series key → value
	leader map[string]float64 // pod → its oce_raft_leader
	errs   map[string]string  // pod → why its scrape failed
}

// scrapeRound scrapes every member once. A sample's own labels win over
// the target's (honorLabels).
func scrapeRound(t *testing.T, s scraper, ms []*member) round {
	t.Helper()
	r := round{up: map[string]bool{}, series: map[string]float64{}, leader: map[string]float64{}, errs: map[string]string{}}
	for _, m := range ms {
		tl := targetLabelsOf(m)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		body, err := s.scrape(ctx, m)
		cancel()
		up := 0.0
		if err == nil {
			up = 1
			for _, smp := range parseSamples(t, body) {
				if !strings.HasPrefix(smp.name, "oce_") {
					continue
				}
				labels := map[string]string{}
				for k, v := range tl {
					labels[k] = v
				}
				for k, v := range smp.labels {
					labels[k] = v
				}
				r.series[seriesKey(smp.name, labels)] = smp.value
				if smp.name == "oce_raft_leader" {
					r.leader[m.pod] = smp.value
				}
			}
		} else {
			r.errs[m.pod] = err.Error()
		}
		r.up[m.pod] = err == nil
		// Prometheus writes up for every scrape, failed or not.
		r.series[seriesKey("up", tl)] = up
	}
	return r
}

// promValue writes a sample value in promtool's series notation.
func promValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// inputSeries turns the rounds into promtool input series: a series absent
// from a round after being present gets a staleness marker, as Prometheus
// writes for every series of a failed scrape or a series that vanished.
func inputSeries(rounds []round) []map[string]string {
	keys := map[string]bool{}
	for _, r := range rounds {
		for k := range r.series {
			keys[k] = true
		}
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	slices.Sort(sorted)
	var out []map[string]string
	for _, k := range sorted {
		vals := make([]string, len(rounds))
		for i, r := range rounds {
			v, ok := r.series[k]
			switch {
			case ok:
				vals[i] = promValue(v)
			case i > 0 && vals[i-1] != "_" && vals[i-1] != "stale":
				vals[i] = "stale"
			default:
				vals[i] = "_"
			}
		}
		out = append(out, map[string]string{"series": k, "values": strings.Join(vals, " ")})
	}
	return out
}

var labelRef = regexp.MustCompile(`\{\{\s*\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)

// render fills an annotation template that uses only {{ $labels.x }}.
func render(t *testing.T, tmpl string, labels map[string]string) string {
	t.Helper()
	out := labelRef.ReplaceAllStringFunc(tmpl, func(m string) string {
		return labels[labelRef.FindStringSubmatch(m)[1]]
	})
	require.NotContains(t, out, "{{", "the test renders $labels only: %s", tmpl)
	return out
}

// alertSpec is one alert of the PrometheusRule.
type alertSpec struct {
	For         time.Duration
	Labels      map[string]string
	Annotations map[string]string
}

func alertSpecs(t *testing.T) map[string]alertSpec {
	t.Helper()
	var pr prometheusRule
	readYAML(t, "prometheusrule.yaml", &pr)
	out := map[string]alertSpec{}
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			d, err := time.ParseDuration(r.For)
			require.NoError(t, err, r.Alert)
			out[r.Alert] = alertSpec{For: d, Labels: r.Labels, Annotations: r.Annotations}
		}
	}
	return out
}

// expAlert is the alert promtool must see firing, with alert's own labels
// added to labels and its annotations rendered.
func expAlert(t *testing.T, a alertSpec, labels map[string]string) map[string]any {
	t.Helper()
	l := map[string]string{}
	for k, v := range labels {
		l[k] = v
	}
	for k, v := range a.Labels {
		l[k] = v
	}
	ann := map[string]string{}
	for k, v := range a.Annotations {
		ann[k] = render(t, v, l)
	}
	return map[string]any{"exp_labels": l, "exp_annotations": ann}
}

// TestLeaderLossFiresAlerts kills the leader of a real 3-member cluster and
// one more member, so the survivor has no quorum and no member can be
// elected, scrapes every member's /metrics throughout as Prometheus would
// (failed scrapes: up 0 and staleness markers), and has promtool evaluate
// the PrometheusRule over those samples: OceNoLeader fires a minute after
// the kill, OceCoordinatorDown five minutes after it for each killed
// member, and neither before.
//
// promtool runs the rules over recorded samples, not a live Prometheus:
// scrape round i stands at i × the ServiceMonitor's interval (30 s). The
// scrapes themselves come 500 ms apart, so an election the survivor could
// win would have shown within the rounds after the kill; it shows none
// because none is possible, and the test checks it never reported itself
// leader and names no leader at the end.
func TestLeaderLossFiresAlerts(t *testing.T) {
	bin := promtool(t)
	c := startTestCluster(t, buildCoordinator(t), 3)
	s := scraper{token: c.metricsToken(), hc: &http.Client{Timeout: 5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: c.ca}}}}
	// The binding and token are replicated to every member before the
	// first round.
	require.Eventually(t, func() bool {
		for _, m := range c.members {
			if _, err := s.scrape(t.Context(), m); err != nil {
				return false
			}
		}
		return true
	}, memberWait, 20*time.Millisecond, "every member serves /metrics to the metrics-reader")

	var sm serviceMonitor
	readYAML(t, "servicemonitor.yaml", &sm)
	interval, err := time.ParseDuration(sm.Spec.Endpoints[0].Interval)
	require.NoError(t, err)

	var rounds []round
	tick := time.NewTicker(scrapeEvery)
	defer tick.Stop()
	next := func() round {
		r := scrapeRound(t, s, c.members)
		<-tick.C
		return r
	}
	// The recording starts once the cluster is steady: roundsBefore rounds
	// in a row with every member scraped and one leader, the same one. (A
	// real scrape is 30 s apart; an election on this busy machine between
	// two 500 ms rounds would look like a minute without a leader.)
	var leader *member
	deadline := time.Now().Add(memberWait)
	for len(rounds) < roundsBefore {
		require.True(t, time.Now().Before(deadline), "no %d steady rounds with one leader", roundsBefore)
		r := next()
		var leaders []*member
		steady := true
		for _, m := range c.members {
			steady = steady && r.up[m.pod]
			if r.leader[m.pod] == 1 {
				leaders = append(leaders, m)
			}
		}
		if !steady || len(leaders) != 1 || (leader != nil && leaders[0] != leader) {
			rounds, leader = nil, nil
			continue
		}
		rounds, leader = append(rounds, r), leaders[0]
	}
	victims := []*member{leader}
	var survivor *member
	for _, m := range c.members {
		if m != leader {
			if len(victims) < 2 {
				victims = append(victims, m)
			} else {
				survivor = m
			}
		}
	}
	for _, m := range victims {
		c.kill(m)
	}
	killRound := len(rounds)
	for range roundsAfter {
		rounds = append(rounds, next())
	}

	// What the rounds after the kill must show for the alerts to mean
	// anything: the survivor answers, the killed members do not, and
	// nobody is elected.
	for i, r := range rounds[killRound:] {
		require.True(t, r.up[survivor.pod], "round %d: the survivor serves /metrics without a leader: %s", killRound+i, r.errs[survivor.pod])
		require.Zero(t, r.leader[survivor.pod], "round %d: the survivor is not elected", killRound+i)
		for _, m := range victims {
			require.False(t, r.up[m.pod], "round %d: %s is dead", killRound+i, m.pod)
		}
	}
	info, err := c.client(survivor).Cluster(t.Context())
	require.NoError(t, err)
	require.Empty(t, info.LeaderID, "the survivor knows no leader: %+v", info)

	// The unit test promtool runs: every round's samples, and the alerts
	// expected at each round's time.
	specs := alertSpecs(t)
	at := func(i int) string { return fmt.Sprintf("%ds", int(interval.Seconds())*i) }
	var cases []map[string]any
	noLeaderFires := killRound + int(specs["OceNoLeader"].For/interval)
	downFires := killRound + int(specs["OceCoordinatorDown"].For/interval)
	require.Less(t, downFires, len(rounds), "enough rounds after the kill for OceCoordinatorDown's for")
	for i := range rounds {
		noLeader, down := []map[string]any{}, []map[string]any{}
		if i >= noLeaderFires {
			noLeader = append(noLeader, expAlert(t, specs["OceNoLeader"], map[string]string{"namespace": targetNamespace}))
		}
		if i >= downFires {
			for _, m := range victims {
				down = append(down, expAlert(t, specs["OceCoordinatorDown"], targetLabelsOf(m)))
			}
		}
		cases = append(cases,
			map[string]any{"eval_time": at(i), "alertname": "OceNoLeader", "exp_alerts": noLeader},
			map[string]any{"eval_time": at(i), "alertname": "OceCoordinatorDown", "exp_alerts": down})
	}
	unit, err := yaml.Marshal(map[string]any{
		"rule_files":          []string{"rules.yaml"},
		"evaluation_interval": interval.String(),
		"tests": []any{map[string]any{
			"name":            fmt.Sprintf("leader %s and %s killed at %s", leader.pod, victims[1].pod, at(killRound)),
			"interval":        interval.String(),
			"input_series":    inputSeries(rounds),
			"alert_rule_test": cases,
		}},
	})
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yaml"), ruleGroups(t), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "leaderloss_test.yaml"), unit, 0o600))
	out, err := execPromtool(t.Context(), bin, dir, "test", "rules", "leaderloss_test.yaml")
	require.NoError(t, err, "promtool test rules over the scraped samples:\n%s", out)
	require.Contains(t, out, "SUCCESS", out)
	t.Logf("%d rounds, %d series; kill at round %d; OceNoLeader fires at %s, OceCoordinatorDown at %s",
		len(rounds), len(inputSeries(rounds)), killRound, at(noLeaderFires), at(downFires))
}
