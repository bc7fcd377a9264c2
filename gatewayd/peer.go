package gatewayd

import (
	"context"
	"time"

	"oce.dev/oce/shared/logging"
	"oce.dev/oce/shared/phase"
	"oce.dev/oce/shared/status"
)

// WaitingForPeerMsg prefixes the throttled wait record of peer-plugin-status.
const WaitingForPeerMsg = "Waiting for Harness plugin runtime status: "

// peerFetchTimeout bounds one remote-status read.
const peerFetchTimeout = 2 * time.Second

func (g *Gatewayd) fetchPeer(ctx context.Context) (status.PluginStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, peerFetchTimeout)
	defer cancel()
	return status.FetchRemote(ctx, g.cfg.PeerStatusURL, status.RemoteStatusToken(g.cfg.PluginStatusKey, g.cfg.RevisionID))
}

// waitPeerPlugins waits, without a deadline, until the Harness reports a
// settled plugin runtime status; only ctx (SIGTERM) ends it.
func (g *Gatewayd) waitPeerPlugins(ctx context.Context) (status.PluginStatus, error) {
	thr := logging.NewThrottle(g.cfg.Policy.PeerWaitLogEvery, nil)
	for {
		ps, err := g.fetchPeer(ctx)
		if err == nil && ps.Phase != status.PluginPhasePending {
			return ps, nil
		}
		reason := status.RemoteErrorReason(err)
		if err == nil {
			reason = "pending"
		}
		if ctx.Err() != nil {
			return status.PluginStatus{}, ctx.Err()
		}
		if thr.Allow() {
			g.log.Info(WaitingForPeerMsg + reason)
		}
		if err := sleepCtx(ctx, g.cfg.Policy.PeerPluginPoll); err != nil {
			return status.PluginStatus{}, err
		}
	}
}

// watchPeer polls the Harness's remote status every PeerPoll. A changed
// identity logs peer-status-changed and asks for a respawn; an unreadable
// peer is waited for; the same identity back logs peer-status-restored.
func (g *Gatewayd) watchPeer(ctx context.Context, baseline *status.PluginStatus) {
	unreadable := false
	t := time.NewTicker(g.cfg.Policy.PeerPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ps, err := g.fetchPeer(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !unreadable {
				logging.Event(ctx, g.log, map[string]any{"event": logging.EventPeerStatus,
					"container": "gateway", "state": "unreadable", "reason": status.RemoteErrorReason(err)})
			}
			unreadable = true
			continue
		}
		switch {
		case baseline == nil:
			b := ps
			baseline = &b
		case ps.SameIdentity(*baseline):
			if unreadable {
				g.phases.Record(PhasePeerStatusRestored, phase.OK, 0, "")
			}
		default:
			b := ps
			baseline = &b
			g.phases.Record(PhasePeerStatusChanged, phase.OK, 0, "")
			select {
			case g.peerChanged <- struct{}{}:
			default:
			}
		}
		unreadable = false
	}
}
