package gatewayd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

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
