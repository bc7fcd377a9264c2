package harnessd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"oce.dev/oce/shared/atomicfile"
	"oce.dev/oce/shared/backoff"
	"oce.dev/oce/shared/logging"
	"oce.dev/oce/shared/supervise"
)

// Companion workspace node timing (docs/design/reference.md#s1-6).
const (
	// NodeRestartDelay is the pause before a nodehost that exited is
	// started again; it doubles with every exit in a row, up to
	// NodeRestartMax, so a node that cannot connect (a bad setup code, a
	// Gateway that is down) costs a start a minute rather than a second.
	NodeRestartDelay = time.Second
	// NodeRestartMax bounds the doubled restart delay.
	NodeRestartMax = time.Minute
	// NodeStableRun is how long a nodehost must have run for its exit to
	// count as a new failure rather than one more in a row: the delay
	// starts over from NodeRestartDelay.
	NodeStableRun = 30 * time.Second
	// NodeWatchInterval is how often harnessd looks for an enrollment file
	// or a device token before the node is first started (the coordinator
	// delivers the one-use enrollment file after the Harness started).
	NodeWatchInterval = time.Second
	// NodeTokenFile is nodehost's persisted device token in its state dir.
	NodeTokenFile = "device-token"
)

// nodeWanted reports whether the companion node can run: a state directory
// and either a one-use enrollment file or a stored device token.
func (h *harness) nodeWanted() bool {
	c := &h.cfg
	if c.NodehostStateDir == "" {
		return false
	}
	if c.NodehostEnrollment != "" {
		if _, err := os.Stat(c.NodehostEnrollment); err == nil {
			return true
		}
	}
	_, err := os.Stat(filepath.Join(c.NodehostStateDir, NodeTokenFile))
	return err == nil
}

// NodeEnrollmentCopy is the private copy of the delivered enrollment file
// that nodehost consumes (in its state dir).
const NodeEnrollmentCopy = "enrollment"

// NodeIdentityCopy is the private copy of the provisioned node identity
// that nodehost adopts (in its state dir).
const NodeIdentityCopy = "identity-provisioned"

// privateEnrollment hands nodehost a private copy of the delivered one-use
// enrollment file: a Kubernetes Secret volume file is owned by root (and
// fsGroup may add group bits), which nodehost rightly refuses, and it cannot
// be deleted there. The copy is written 0600 by this process; nodehost
// deletes it after enrolling. Once a device token exists no copy is made and
// the delivered file is removed where that is possible. It returns the path
// to pass, or "" for none.
func (h *harness) privateEnrollment() string {
	return h.privateCopy(h.cfg.NodehostEnrollment, NodeEnrollmentCopy)
}

// privateIdentity hands nodehost a private copy of the provisioned node
// identity the same way (before the node enrolled only): nodehost adopts
// and deletes it.
func (h *harness) privateIdentity() string {
	return h.privateCopy(h.cfg.NodehostIdentity, NodeIdentityCopy)
}

// privateCopy copies the delivered file src into nodehost's state dir as
// name (0600) while the node holds no device token; "" when there is
// nothing to pass.
func (h *harness) privateCopy(src, name string) string {
	c := &h.cfg
	if src == "" || c.NodehostStateDir == "" {
		return ""
	}
	if _, err := os.Stat(filepath.Join(c.NodehostStateDir, NodeTokenFile)); err == nil {
		_ = os.Remove(src) // consumed; read-only on Kubernetes, fine
		return ""
	}
	b, err := os.ReadFile(src)
	if err != nil || len(b) == 0 {
		return ""
	}
	if err := os.MkdirAll(c.NodehostStateDir, 0o700); err != nil {
		return ""
	}
	dst := filepath.Join(c.NodehostStateDir, name)
	if err := atomicfile.Write(dst, b, 0o600); err != nil {
		h.log.Warn("could not copy a file for the workspace node", "file", name, "error", err.Error())
		return ""
	}
	return dst
}

// nodeArgs is the companion's command line: the file-only Codex companion.
func (h *harness) nodeArgs() []string {
	c := &h.cfg
	a := []string{"run", "--file-only", "--state-dir", c.NodehostStateDir, "--workspace", c.Workspace}
	if enroll := h.privateEnrollment(); enroll != "" {
		a = append(a, "--enrollment-file", enroll)
	}
	if id := h.privateIdentity(); id != "" {
		a = append(a, "--identity-file", id)
	}
	if c.NodehostGatewayURL != "" {
		a = append(a, "--gateway-url", c.NodehostGatewayURL)
	}
	return a
}

// nodeRestarts decides, after each nodehost exit, how long to wait and
// whether the exit is news: a run of identical quick exits is one warning
// (and a debug record per repeat), not a warning per restart.
type nodeRestarts struct {
	bo         backoff.Sequence
	lastStatus string
	repeats    int
}

func newNodeRestarts(base time.Duration) *nodeRestarts {
	if base <= 0 {
		base = NodeRestartDelay
	}
	return &nodeRestarts{bo: backoff.Sequence{Policy: backoff.Policy{Base: base, Max: max(base, NodeRestartMax)}}}
}

// exited records an exit with status after a run of ran and returns the
// pause before the next start and whether the exit deserves a warning.
func (n *nodeRestarts) exited(status string, ran time.Duration) (time.Duration, bool) {
	if ran >= NodeStableRun {
		n.bo.Reset()
		n.lastStatus = ""
	}
	news := status != n.lastStatus
	if news {
		n.lastStatus, n.repeats = status, 0
	} else {
		n.repeats++
	}
	return n.bo.Next(), news
}

// companion supervises nodehost while harnessd serves: started once an
// enrollment file or device token is present, restarted after every exit
// with a doubling delay (nodeRestarts), stopped (9 s budget) with harnessd.
func (h *harness) companion(ctx context.Context) {
	restarts := newNodeRestarts(h.opts.NodeRestartDelay)
	delay := restarts.bo.Base
	wait := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	for ctx.Err() == nil {
		if !h.nodeWanted() {
			if !wait(NodeWatchInterval) {
				return
			}
			continue
		}
		stderr := logging.LineWriter(h.log.With("child", "nodehost"), "stderr", nil)
		p, err := h.sup.Start(ctx, supervise.Spec{
			Name: "nodehost", Path: h.cfg.NodehostBin, Args: h.nodeArgs(),
			Env: baseEnv(), Dir: h.cfg.Workspace, Stderr: stderr,
			StopBudget: supervise.WorkspaceNodeStopBudget,
		})
		if err != nil {
			_ = stderr.Close()
			if errors.Is(err, supervise.ErrStopping) {
				return
			}
			logging.Event(ctx, h.log, map[string]any{"event": logging.EventWorkspaceNode, "container": Container, "outcome": logging.OutcomeFailed, "code": "UNAVAILABLE"})
			delay, _ = restarts.exited("not started", 0)
		} else {
			started := time.Now()
			logging.Event(ctx, h.log, map[string]any{"event": logging.EventWorkspaceNode, "container": Container, "outcome": logging.OutcomeOK})
			<-p.Done() // a stop reaches nodehost through the supervisor's signal forwarding
			_ = stderr.Close()
			if ctx.Err() != nil {
				return
			}
			st, _ := p.Status()
			var news bool
			delay, news = restarts.exited(st.String(), time.Since(started))
			if news {
				h.log.Warn("nodehost exited", "status", st.String(), "restartInMs", delay.Milliseconds())
			} else {
				h.log.Debug("nodehost exited again", "status", st.String(), "repeats", restarts.repeats,
					"restartInMs", delay.Milliseconds())
			}
		}
		if !wait(delay) {
			return
		}
	}
}
