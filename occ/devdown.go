package occ

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"oce.dev/oce/shared/proc"
)

// devDown stops what `occ dev up` started: the coordinator first (it stops
// every runtime it runs on the way out, Gateway before Harness), then the
// fake provider and the bridge, then — a safety net — any supervisor the
// local driver recorded that outlived it.
func devDown(ctx context.Context, out io.Writer, dir string, purge bool) error {
	p, err := readPids(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if p.Coordinator.Alive() {
		fmt.Fprintln(out, "stopping the coordinator and every runtime it runs…")
	}
	for _, step := range []struct {
		p    *proc.Process
		wait bool
	}{{p.Coordinator, true}, {p.Provider, false}, {p.Bridge, false}} {
		wait := devHelperStop
		if step.wait {
			wait = DevStopTimeout
		}
		if _, err := proc.Stop(ctx, step.p, wait, devLeftoverGrace, devPoll); err != nil {
			return err
		}
	}
	for _, rp := range recordedRuntimes(dir) {
		if _, err := proc.Stop(ctx, rp, devRuntimeStop, devLeftoverGrace, devPoll); err != nil {
			return err
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

// recordedRuntimes reads the supervisors of every revision's run.json the
// local driver keeps under dir (runtimes/<ns>/<agent>/revisions/<rev>/).
func recordedRuntimes(dir string) []*proc.Process {
	files, _ := filepath.Glob(filepath.Join(dir, "runtimes", "*", "*", "revisions", "*", "run.json"))
	var out []*proc.Process
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var r struct{ Gateway, Harness *proc.Process }
		if json.Unmarshal(b, &r) != nil {
			continue
		}
		for _, p := range []*proc.Process{r.Gateway, r.Harness} {
			if p != nil && p.PID > 0 {
				out = append(out, p)
			}
		}
	}
	return out
}
