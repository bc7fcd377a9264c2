package supervise_test

import (
	"context"
	"errors"
	"oce.dev/oce/shared/logtest"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"oce.dev/oce/shared/supervise"
)

func TestExitStatusShellCode(t *testing.T) {
	cases := []struct {
		st   supervise.ExitStatus
		want int
		ok   bool
		str  string
	}{
		{supervise.ExitStatus{Exited: true}, 0, true, "exit 0"},
		{supervise.ExitStatus{Exited: true, Code: 3}, 3, false, "exit 3"},
		{supervise.ExitStatus{Signal: syscall.SIGTERM}, 143, false, "signal terminated"},
		{supervise.ExitStatus{Signal: syscall.SIGKILL}, 137, false, "signal killed"},
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, tc.st.ShellCode())
		require.Equal(t, tc.ok, tc.st.Success())
		require.Equal(t, tc.str, tc.st.String())
	}
}

func TestNamedBudgets(t *testing.T) {
	require.Equal(t, 330*time.Second, supervise.GatewayStopBudget)
	require.Equal(t, 8*time.Second, supervise.CodexStopBudget)
	require.Equal(t, 8*time.Second, supervise.NativeWorkerStopBudget)
	require.Equal(t, 9*time.Second, supervise.WorkspaceNodeStopBudget)
	require.Equal(t, 256*1024, supervise.DefaultOutputLimit)
}

func TestTestProcessIsSubreaper(t *testing.T) {
	ok, err := supervise.IsSubreaper()
	require.NoError(t, err)
	require.True(t, ok)
}

// Stop in-process: SIGTERM is ignored by the child and its children, the
// injected budget expires, the whole group is killed.
func TestProcessStopBudgetThenKill(t *testing.T) {
	c := spawn(t, supervise.Spec{Path: helper, Args: []string{"ignore-term", "2"}, StopBudget: 200 * time.Millisecond})
	pids := pidsOf(t, c.expect(t, "PIDS"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, c.Stop(ctx))
	c.expectTermAll(t, pids)
	st, ok := c.Status()
	require.True(t, ok)
	require.Equal(t, syscall.SIGKILL, st.Signal)
	require.Eventually(t, func() bool { return gone(pids) }, 30*time.Second, 10*time.Millisecond)
}

// A child that honours SIGTERM ends Stop long before a one-hour budget.
func TestProcessStopGraceful(t *testing.T) {
	p, err := testSup.Start(context.Background(), supervise.Spec{Path: "/bin/sleep", Args: []string{"1000"}, StopBudget: time.Hour})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, p.Stop(ctx))
	st, err := p.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, syscall.SIGTERM, st.Signal)
	require.ErrorIs(t, p.Signal(syscall.SIGTERM), supervise.ErrFinished)
}

// The central reaper must hand each child its own status while orphans are
// being reaped concurrently.
func TestReaperKeepsStatusesOfKnownChildren(t *testing.T) {
	orph := run(t, helper, "orphans", "300", "0")
	var wg sync.WaitGroup
	errs := make(chan error, 60)
	for i := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := testSup.Start(context.Background(), supervise.Spec{Path: helper, Args: []string{"exit", strconv.Itoa(i % 7)}})
			if err != nil {
				errs <- err
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			st, err := p.Wait(ctx)
			if err == nil && (!st.Exited || st.Code != i%7) {
				err = errors.New("child " + strconv.Itoa(i) + " got " + st.String())
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, 0, orph.wait(t).ShellCode())
}

func TestStartErrors(t *testing.T) {
	ctx := context.Background()
	_, err := testSup.Start(ctx, supervise.Spec{})
	require.ErrorIs(t, err, supervise.ErrInvalidSpec)
	_, err = testSup.Start(ctx, supervise.Spec{Path: "no-such-program-oce"})
	require.ErrorIs(t, err, supervise.ErrNotFound)
	_, err = testSup.Start(ctx, supervise.Spec{Path: "/nonexistent/prog"})
	require.ErrorIs(t, err, supervise.ErrStart)
	_, err = testSup.Start(ctx, supervise.Spec{Path: "/bin/true", StopBudget: -1})
	require.ErrorIs(t, err, supervise.ErrInvalidSpec)
}

// StopAll stops every child, releases Hold, and refuses later starts.
func TestStopAllReleasesHold(t *testing.T) {
	s, err := supervise.New(supervise.Options{NoSignals: true})
	require.NoError(t, err)
	ctx := context.Background()
	p1, err := s.Start(ctx, supervise.Spec{Path: "/bin/sleep", Args: []string{"1000"}, StopBudget: time.Hour})
	require.NoError(t, err)
	p2 := spawnWith(t, s, supervise.Spec{Path: helper, Args: []string{"ignore-term", "1"}, StopBudget: 100 * time.Millisecond})
	p2.expect(t, "PIDS") // armed: SIGTERM is ignored from here on

	short, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, s.Hold(short), context.Canceled)

	held := make(chan error, 1)
	go func() { held <- s.Hold(ctx) }()
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	require.NoError(t, s.StopAll(wctx))
	require.NoError(t, <-held)
	st1, _ := p1.Status()
	st2, _ := p2.Status()
	require.Equal(t, syscall.SIGTERM, st1.Signal)
	require.Equal(t, syscall.SIGKILL, st2.Signal)
	_, err = s.Start(ctx, supervise.Spec{Path: "/bin/true"})
	require.ErrorIs(t, err, supervise.ErrStopping)
}

// A descendant that escapes the group (setsid) and keeps the output pipe
// open cannot block Wait beyond the drain budget.
func TestWaitBoundedByDrainBudget(t *testing.T) {
	marker := "1000." + strconv.Itoa(os.Getpid())
	var out logtest.Buffer
	p, err := testSup.Start(context.Background(), supervise.Spec{
		Path: helper, Args: []string{"escape", marker},
		Stdout: &out, DrainBudget: 200 * time.Millisecond,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := p.Wait(ctx)
	require.NoError(t, err)
	require.True(t, st.Success())
	require.Equal(t, "leader-done\n", out.String())
	// The escaped sleep is still alive (outside the group); clean it up.
	var escaped []int
	require.Eventually(t, func() bool {
		escaped = nil
		for pid := range procTable() {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			if strings.Contains(string(b), marker) {
				escaped = append(escaped, pid)
			}
		}
		return len(escaped) == 1
	}, 10*time.Second, 10*time.Millisecond)
	require.True(t, alive(escaped[0]))
	require.NoError(t, syscall.Kill(escaped[0], syscall.SIGKILL))
	require.Eventually(t, func() bool { return gone(escaped) }, 10*time.Second, 10*time.Millisecond)
}
