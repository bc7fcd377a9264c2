package nodehost

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseCapacity(t *testing.T) {
	for in, want := range map[string]int{"": 8, "1": 1, "1024": 1024, "8": 8} {
		n, err := ParseCapacity(in)
		require.NoError(t, err)
		require.Equal(t, want, n)
	}
	for _, bad := range []string{"0", "1025", "-1", "eight", "8.5", " 8"} {
		_, err := ParseCapacity(bad)
		require.ErrorIs(t, err, ErrBadCapacity, bad)
	}
}

func TestAdmissionExactCapacityNoDisplacement(t *testing.T) {
	const capacity = 8
	root := t.TempDir()
	w, err := NewWorkers(capacity, filepath.Join(root, ".workers"), []string{"sleep", "3600"}, os.Environ())
	require.NoError(t, err)
	defer w.StopAll(context.Background())

	var mu sync.Mutex
	admitted, refused := map[string]WorkerInfo{}, 0
	var wg sync.WaitGroup
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			info, started, err := w.Admit(fmt.Sprintf("session-%03d", i), fmt.Sprintf("launch-%d", i))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				require.ErrorIs(t, err, ErrCapacity)
				refused++
				return
			}
			require.True(t, started)
			admitted[info.SessionKey] = info
		}(i)
	}
	wg.Wait()
	require.Len(t, admitted, capacity)
	require.Equal(t, 100-capacity, refused)
	total, avail := w.Capacity()
	require.Equal(t, capacity, total)
	require.Zero(t, avail)

	// none displaced: the admitted ones are exactly the running ones
	for _, info := range w.List() {
		require.Equal(t, admitted[info.SessionKey].Pid, info.Pid)
		st, err := os.Stat(info.Workspace)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o700), st.Mode().Perm())
		tmp, err := os.Stat(filepath.Join(filepath.Dir(info.Workspace), "tmp"))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o700), tmp.Mode().Perm())
	}
	// re-admitting an active session is idempotent and takes no slot
	var any WorkerInfo
	for _, v := range admitted {
		any = v
		break
	}
	again, started, err := w.Admit(any.SessionKey, "x")
	require.NoError(t, err)
	require.False(t, started)
	require.Equal(t, any.Pid, again.Pid)

	// stopping one frees exactly one slot
	require.NoError(t, w.Stop(context.Background(), any.SessionKey))
	_, _, err = w.Admit("late-1", "l1")
	require.NoError(t, err)
	_, _, err = w.Admit("late-2", "l2")
	require.ErrorIs(t, err, ErrCapacity)
	requireCode(t, w.Stop(context.Background(), "nobody"), CodeWorkerNotFound)
}

func TestWorkerStopBudgetKillsIgnoringWorker(t *testing.T) {
	root := t.TempDir()
	w, err := NewWorkers(1, root, []string{"sh", "-c", "trap '' TERM; sleep 3600 & wait"}, os.Environ())
	require.NoError(t, err)
	w.budget = 0 // injected: SIGKILL right after SIGTERM
	info, _, err := w.Admit("s", "l")
	require.NoError(t, err)
	require.NoError(t, w.Stop(context.Background(), "s"))
	require.Error(t, processAlive(info.Pid))
	total, avail := w.Capacity()
	require.Equal(t, total, avail)
}

func processAlive(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Signal(nilSignal{})
}

type nilSignal struct{}

func (nilSignal) String() string { return "0" }
func (nilSignal) Signal()        {}
