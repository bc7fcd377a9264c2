package server

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
)

// Join retry pacing: the first retry after joinRetryMin, doubling up to
// joinRetryMax, for as long as the server runs.
const (
	joinRetryMin   = 200 * time.Millisecond
	joinRetryMax   = 5 * time.Second
	joinRequestTTL = 15 * time.Second
)

// joinCluster asks a member to add this node, through the API client (a
// follower's NOT_LEADER answer names the leader, which the client tries
// next), retrying until it succeeds or ctx ends. targets is a
// comma-separated list of HTTP addresses, tried in turn.
func joinCluster(ctx context.Context, log *slog.Logger, targets, token string, req wire.ClusterJoin, opts ...client.Option) error {
	list := strings.Split(targets, ",")
	delay := joinRetryMin
	for attempt := 0; ; attempt++ {
		target := strings.TrimSpace(list[attempt%len(list)])
		if target != "" {
			rctx, cancel := context.WithTimeout(ctx, joinRequestTTL)
			_, err := client.New(target, token, opts...).Join(rctx, req.ID, req.RaftAddr, req.HTTPAddr)
			cancel()
			if err == nil {
				log.Info("joined the cluster", "via", target)
				return nil
			}
			log.Info("join attempt failed", "via", target, "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, joinRetryMax)
	}
}

// joinTargets drops the member's own advertised HTTP address from the
// comma-separated join list (scheme ignored), so one list can be given to every member of a
// StatefulSet: the member it names (ordinal 0) bootstraps when it has no
// state, the others join it.
func joinTargets(join, self string) string {
	norm := func(u string) string { // host:port: members advertise it bare and join with https://
		u = strings.TrimSpace(u)
		if _, rest, ok := strings.Cut(u, "://"); ok {
			u = rest
		}
		return strings.TrimRight(u, "/")
	}
	var keep []string
	for _, t := range strings.Split(join, ",") {
		if t = strings.TrimSpace(t); t != "" && norm(t) != norm(self) {
			keep = append(keep, t)
		}
	}
	return strings.Join(keep, ",")
}
