package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/coordinator/api/wire"
	kdriver "oce.dev/oce/coordinator/compute/kubernetes"
)

// Handover measurement (issue 23): a sender sends the Agent a message
// through the coordinator every sendEvery while it is redeployed; the
// outage its users see is the longest time between two answered messages.
const (
	sendEvery   = 250 * time.Millisecond
	sendTimeout = 30 * time.Second // one message, the relay's dial retries included
	maxInFlight = 8                // messages outstanding at once (a tick is skipped beyond)
)

// sent is one message: when it was sent and answered, and whether it was.
type sent struct {
	start, end time.Time
	ok         bool
}

// sender sends a message every sendEvery until stopped.
type sender struct {
	mu    sync.Mutex
	sends []sent
	stop  chan struct{}
	done  sync.WaitGroup
}

func startSender(agent string) *sender {
	s := &sender{stop: make(chan struct{})}
	slots := make(chan struct{}, maxInFlight)
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		tick := time.NewTicker(sendEvery)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
			select {
			case slots <- struct{}{}:
			default:
				continue // as many in flight as allowed: this tick is skipped
			}
			s.done.Add(1)
			go func(n int) {
				defer s.done.Done()
				defer func() { <-slots }()
				ctx, cancel := context.WithTimeout(context.Background(), sendTimeout)
				defer cancel()
				start := time.Now()
				out, code := runOcc(ctx, "-n", Team, "agent", "send", agent, fmt.Sprintf("handover %d", n),
					"--timeout", sendTimeout.String())
				s.mu.Lock()
				s.sends = append(s.sends, sent{start: start, end: time.Now(), ok: code == 0 && strings.Contains(out, FakeReply)})
				s.mu.Unlock()
			}(n)
		}
	}()
	return s
}

// answeredSince reports whether a message sent after t was answered.
func (s *sender) answeredSince(t time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.sends {
		if r.ok && r.start.After(t) {
			return true
		}
	}
	return false
}

func (s *sender) finish() []sent {
	close(s.stop)
	s.done.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sends)
}

// longestGap is the longest time between two consecutive answers (by
// answer time), and how many messages went unanswered.
func longestGap(sends []sent) (gap time.Duration, failed int) {
	var ends []time.Time
	for _, r := range sends {
		if r.ok {
			ends = append(ends, r.end)
		} else {
			failed++
		}
	}
	slices.SortFunc(ends, func(a, b time.Time) int { return a.Compare(b) })
	for i := 1; i < len(ends); i++ {
		gap = max(gap, ends[i].Sub(ends[i-1]))
	}
	return gap, failed
}

// BenchmarkHandover measures, per topology on the real node, what a user
// of a new Agent and of a redeployed one waits for: deploy → Gateway Pod
// created → Ready, deploy → first reply, and the redeploy outage — the
// longest gap between answers while a message goes through the
// coordinator every 250 ms (issue 23's targets: Pod created → Ready ≤ 12 s,
// first reply ≤ 15 s embedded / ≤ 40 s dedicated, outage ≤ 15 s / ≤ 30 s).
func BenchmarkHandover(b *testing.B) {
	team(b)
	occTeam(b, "config", "create", "handover-emb-cfg", "-f", demoFile(b, "embedded.json"))
	occTeam(b, "config", "create", "handover-codex-cfg", "-f", demoFile(b, "dedicated-codex.json"))
	for i := 0; i < b.N; i++ {
		handover(b, fmt.Sprintf("handover-emb-%d", i), "emb", nil)
		handover(b, fmt.Sprintf("handover-ded-%d", i), "ded", []string{"--mode", "dedicated"})
	}
}

// handover creates and deploys one Agent, then redeploys it under the
// sender, reporting its figures with the tag (emb, ded).
func handover(b *testing.B, name, tag string, mode []string) {
	cfg := map[string]string{"emb": "handover-emb-cfg", "ded": "handover-codex-cfg"}[tag]
	var a wire.Agent
	occJSON(b, &a, append(append([]string{"-n", Team, "agent", "create", name, "--config", cfg}, mode...),
		"--auth-method", "api_key", "--auth-ref", authRef(KeyGood))...)
	pods := watchAgentPods(b, a.ID)
	role := kdriver.RoleGateway
	if tag == "ded" {
		role = kdriver.RoleAgent
	}
	d := deployAndReply(b, pods, name, role)
	gw := pods.of(kdriver.RoleGateway, d.rev)
	require.NotEmpty(b, gw)
	b.ReportMetric(readyTime(gw).Sub(gw[0].Created).Seconds(), "s-"+tag+"-gateway-created-to-ready")
	b.ReportMetric(float64(len(gw)), tag+"-gateway-pods-first-deploy")
	b.ReportMetric(d.re.Seconds(), "s-"+tag+"-first-reply")

	s := startSender(name)
	require.Eventually(b, func() bool { return s.answeredSince(time.Time{}) }, 2*time.Minute, 50*time.Millisecond,
		"the Agent answers the sender before the redeploy")
	t0 := time.Now()
	occTeam(b, "agent", "deploy", name, "--wait", "--timeout", "15m")
	deployed := time.Now()
	require.Eventually(b, func() bool { return s.answeredSince(deployed) }, 10*time.Minute, 100*time.Millisecond,
		"the Agent answers after the redeploy")
	sends := s.finish()
	gap, failed := longestGap(sends)
	b.ReportMetric(gap.Seconds(), "s-"+tag+"-redeploy-outage")
	b.ReportMetric(deployed.Sub(t0).Seconds(), "s-"+tag+"-redeploy-serving")
	b.Logf("%s: %d messages, %d unanswered, longest gap %s; redeploy → serving %s", tag, len(sends), failed,
		gap.Round(100*time.Millisecond), deployed.Sub(t0).Round(100*time.Millisecond))
	deleteAgent(b, name, a.ID)
}
