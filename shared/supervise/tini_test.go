package supervise_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Under the real `tini -s -e 143`, a supervisor whose child leaves 1,000
// orphans (half in its group, half setsid daemons) reaps every one of them
// itself: no zombie remains below tini, and the reaper counts exactly 1,000.
func TestTiniOrphanedGrandchildrenLeaveNoZombie(t *testing.T) {
	const n = 1000
	c := run(t, rt.Tini, "-s", "-e", "143", "--", helper, "supervise", "-linger", "--", helper, "orphans", strconv.Itoa(n), "0")
	sup := field(t, c.expect(t, "READY"), "pid")
	require.Equal(t, "CHILD-EXITED code=0", c.expect(t, "CHILD-EXITED"))
	require.Eventually(t, func() bool { return len(descendants(sup)) == 0 }, 60*time.Second, 20*time.Millisecond,
		"orphans or zombies remain below the supervisor")
	require.Empty(t, zombies(descendants(c.Pid())), "zombies below tini")
	kill(t, c.Pid(), syscall.SIGTERM)
	require.Equal(t, fmt.Sprintf("EXIT reaped=%d", n), c.expect(t, "EXIT"))
	st := c.wait(t)
	require.True(t, st.Exited)
	require.Equal(t, 0, st.Code)
}

// Control for the test above: without the subreaper registration the
// orphans go to tini (which reaps them), and the supervisor reaps none.
func TestWithoutSubreaperOrphansPassBy(t *testing.T) {
	c := run(t, rt.Tini, "-s", "-e", "143", "--", helper, "supervise", "-linger", "-no-subreaper", "--", helper, "orphans", "100", "0")
	sup := field(t, c.expect(t, "READY"), "pid")
	require.Equal(t, "CHILD-EXITED code=0", c.expect(t, "CHILD-EXITED"))
	require.Eventually(t, func() bool { return len(descendants(c.Pid())) == 1 }, 60*time.Second, 20*time.Millisecond,
		"only the supervisor remains below tini")
	kill(t, sup, syscall.SIGTERM)
	require.Equal(t, "EXIT reaped=0", c.expect(t, "EXIT"))
	require.Equal(t, 0, c.wait(t).ShellCode())
}

// The supervisor exits with its child's shell code; tini passes it on, and
// maps 143 (a SIGTERM stop) to 0 only with -e 143.
func TestExitCodePropagation(t *testing.T) {
	cases := []struct {
		name  string
		argv  []string
		term  bool
		want  int
		child string
	}{
		{"exit 3", []string{helper, "supervise", "--", helper, "exit", "3"}, false, 3, "code=3"},
		{"exit 0", []string{helper, "supervise", "--", helper, "exit", "0"}, false, 0, "code=0"},
		{"tini exit 3", []string{rt.Tini, "-s", "-e", "143", "--", helper, "supervise", "--", helper, "exit", "3"}, false, 3, "code=3"},
		{"sigterm bare", []string{helper, "supervise", "--", "/bin/sleep", "1000"}, true, 143, "code=143"},
		{"sigterm tini -e 143", []string{rt.Tini, "-s", "-e", "143", "--", helper, "supervise", "--", "/bin/sleep", "1000"}, true, 0, "code=143"},
		{"sigterm tini without -e", []string{rt.Tini, "-s", "--", helper, "supervise", "--", "/bin/sleep", "1000"}, true, 143, "code=143"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := run(t, tc.argv[0], tc.argv[1:]...)
			c.expect(t, "READY")
			if tc.term {
				// Signal the outermost process only, as the kubelet does.
				kill(t, c.Pid(), syscall.SIGTERM)
			}
			require.Equal(t, "CHILD-EXITED "+tc.child, c.expect(t, "CHILD-EXITED"))
			require.Equal(t, tc.want, c.wait(t).ShellCode())
		})
	}
}

// As PID 1 of a new PID namespace the supervisor reaps every orphan without
// registering as subreaper, and propagates its child's exit code on SIGTERM.
func TestPID1ReapsAndPropagates(t *testing.T) {
	const n = 200
	c := run(t, "unshare", "--pid", "--fork", "--mount-proc", "--", helper, "supervise", "-linger", "--", helper, "orphans", strconv.Itoa(n), "3")
	require.Equal(t, 1, field(t, c.expect(t, "READY"), "pid"))
	require.Equal(t, "CHILD-EXITED code=3", c.expect(t, "CHILD-EXITED"))
	// The supervisor's host pid is unshare's only child.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", c.Pid(), c.Pid()))
	require.NoError(t, err)
	kids := strings.Fields(string(b))
	require.Len(t, kids, 1)
	sup, err := strconv.Atoi(kids[0])
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(descendants(sup)) == 0 }, 60*time.Second, 20*time.Millisecond,
		"orphans or zombies remain below PID 1")
	kill(t, sup, syscall.SIGTERM)
	require.Equal(t, fmt.Sprintf("EXIT reaped=%d", n), c.expect(t, "EXIT"))
	require.Equal(t, 3, c.wait(t).ShellCode())
}

// A child that ignores SIGTERM, and its children that do too, are killed as
// a group when the (injected, short) stop budget runs out.
func TestStopBudgetKillsWholeGroup(t *testing.T) {
	c := run(t, helper, "supervise", "-budget", "300ms", "--", helper, "ignore-term", "3")
	sup := field(t, c.expect(t, "READY"), "pid")
	pids := pidsOf(t, c.expect(t, "PIDS"))
	require.Len(t, pids, 4)
	kill(t, sup, syscall.SIGTERM)
	c.expectTermAll(t, pids)
	require.Equal(t, "CHILD-EXITED code=137", c.expect(t, "CHILD-EXITED"))
	require.Equal(t, 137, c.wait(t).ShellCode())
	require.Eventually(t, func() bool { return gone(pids) }, 30*time.Second, 10*time.Millisecond, "group members survive")
}

// A second SIGTERM kills at once: with a one-hour budget the supervisor can
// only exit before the test's deadline because of the second signal.
func TestSecondSigtermKillsAtOnce(t *testing.T) {
	c := run(t, helper, "supervise", "-budget", "1h", "--", helper, "ignore-term", "2")
	sup := field(t, c.expect(t, "READY"), "pid")
	pids := pidsOf(t, c.expect(t, "PIDS"))
	kill(t, sup, syscall.SIGTERM)
	c.expectTermAll(t, pids)
	_, exited := c.Status()
	require.False(t, exited, "the first SIGTERM must not end the supervisor")
	for _, pid := range pids {
		require.True(t, alive(pid), "pid %d died from the first SIGTERM", pid)
	}
	kill(t, sup, syscall.SIGTERM)
	require.Equal(t, "CHILD-EXITED code=137", c.expect(t, "CHILD-EXITED"))
	require.Equal(t, 137, c.wait(t).ShellCode())
	require.Eventually(t, func() bool { return gone(pids) }, 30*time.Second, 10*time.Millisecond, "group members survive")
}

// Hold keeps the process alive until SIGTERM, then the main exits 0.
func TestHoldReturnsOnSigterm(t *testing.T) {
	c := run(t, helper, "hold")
	pid := field(t, c.expect(t, "READY"), "pid")
	require.Equal(t, c.Pid(), pid)
	_, exited := c.Status()
	require.False(t, exited)
	require.True(t, alive(pid))
	kill(t, pid, syscall.SIGTERM)
	require.Equal(t, "HELD-RETURN signal=terminated", c.expect(t, "HELD-RETURN"))
	st := c.wait(t)
	require.True(t, st.Exited)
	require.Equal(t, 0, st.Code)
}
