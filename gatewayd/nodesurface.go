package gatewayd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"oce.dev/oce/shared/ocproto"
)

// pinnedSurface is every command oce's nodehost may declare: the workspace
// file commands, and for a node that runs tools, system.run/which and the
// worker commands. A pending surface of the pinned node within it is the
// one the coordinator's enrollment meant; anything else waits for a person.
var pinnedSurface = append(slices.Clone(NodeCommands),
	"system.run", "system.which", "worker.cancel.v1", "worker.launch.v1", "worker.status.v1")

// errSurfaceRefused: the pinned node's pending surface declares a command
// oce's nodehost never serves, so gatewayd leaves it to an operator.
var errSurfaceRefused = errors.New("gatewayd: the pinned node's pending surface is not oce's")

// surfacePending reports whether a node.invoke failed because the node's
// declared command surface waits for approval (a node whose declared
// commands grew since its enrollment approved them, e.g. a newer nodehost).
func surfacePending(err error) bool {
	var e *ocproto.Error
	return errors.As(err, &e) && strings.Contains(e.Message, "pending approval")
}

// After an approval the gateway cannot apply to the node's live session, it
// routes nothing to the node (node.invoke answers NOT_CONNECTED) until the
// node reconnects, which nodehost does within one pairing check
// (nodehost.PairingCheckInterval, 10 s) plus its reconnect backoff. The
// invoke right after an approval is retried that long.
const (
	surfaceReconnectWait = 15 * time.Second
	surfaceReconnectPoll = 500 * time.Millisecond
)

// nodeNotConnected reports the gateway's "node not connected": the command
// was never dispatched, so asking again cannot do the work twice.
func nodeNotConnected(err error) bool {
	var e *ocproto.Error
	return errors.As(err, &e) && (e.DetailsCode == "NOT_CONNECTED" || e.Message == "node not connected")
}

// afterApproval calls call until it answers anything but NOT_CONNECTED, or
// surfaceReconnectWait (or ctx) ends.
func afterApproval(ctx context.Context, call func() (json.RawMessage, error)) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, surfaceReconnectWait)
	defer cancel()
	t := time.NewTicker(surfaceReconnectPoll)
	defer t.Stop()
	for {
		raw, err := call()
		if !nodeNotConnected(err) {
			return raw, err
		}
		select {
		case <-ctx.Done():
			return raw, err
		case <-t.C:
		}
	}
}

// approvePinnedSurface approves the pinned node's pending command-surface
// request when every command it declares is in pinnedSurface. It reports
// whether a request was approved.
func approvePinnedSurface(ctx context.Context, c rpc, nodeID string) (bool, error) {
	raw, err := c.RequestRaw(ctx, "node.pair.list", map[string]any{})
	if err != nil {
		return false, err
	}
	var l ocproto.NodePairList
	if err := json.Unmarshal(raw, &l); err != nil {
		return false, fmt.Errorf("node.pair.list: %w", err)
	}
	for _, p := range l.Pending {
		if p.NodeID != nodeID {
			continue
		}
		for _, cmd := range p.Commands {
			if !slices.Contains(pinnedSurface, cmd) {
				return false, fmt.Errorf("%w: it declares %q", errSurfaceRefused, cmd)
			}
		}
		if _, err := c.RequestRaw(ctx, "node.pair.approve", map[string]any{"requestId": p.RequestID}); err != nil {
			return false, err
		}
		return true, nil
	}
	return false, nil
}
