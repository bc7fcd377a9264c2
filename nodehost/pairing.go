package nodehost

import (
	"context"
	"errors"
	"strings"
	"time"

	"oce.dev/oce/shared/ocproto"
)

// PairingCheckInterval is how often a connected node re-publishes its runner
// inventory to learn whether the gateway still holds its session as current.
//
// Why: when an operator approves an expanded surface, the gateway updates the
// live node session only if the session's pairing generation still matches
// the one stored before the approval; otherwise it bumps the stored
// generation, leaves the socket open and routes nothing to it (node.invoke
// answers NOT_CONNECTED) until the node reconnects. The node is told nothing
// in that case, so it asks.
const PairingCheckInterval = 10 * time.Second

// requester is the part of a gateway connection the pairing watch uses.
type requester interface {
	Request(ctx context.Context, method string, params any, out any) error
}

// sessionStale reports whether a runner-inventory answer says the gateway no
// longer holds this connection as the node's current session: details
// PAIRING_CHANGED, or UNAVAILABLE saying so ("not current", "lost its pairing
// ownership", "pairing changed"). Other answers never drop the connection,
// since a reconnect loses the results of invokes in flight: a transient
// store failure retries at the next check, and a first pairing "awaiting
// operator approval" waits for the operator.
func sessionStale(err error) bool {
	var e *ocproto.Error
	if !errors.As(err, &e) {
		return false
	}
	if e.DetailsCode == "PAIRING_CHANGED" {
		return true
	}
	if e.Code != "UNAVAILABLE" {
		return false
	}
	for _, says := range []string{"not current", "pairing ownership", "pairing changed"} {
		if strings.Contains(e.Message, says) {
			return true
		}
	}
	return false
}

// pairingWatch re-publishes the runner inventory every interval, and at once
// when kick fires (the gateway's node.pair.resolved), until its context ends.
type pairingWatch struct {
	interval time.Duration
	// confirm is the wait before asking again after a stale answer: right
	// after a bootstrap approval the gateway answers one check "pairing
	// changed" for a session that is current a moment later.
	confirm   time.Duration
	kick      <-chan struct{}
	reconnect func()
}

// pairingConfirmDelay is pairingWatch.confirm in production.
const pairingConfirmDelay = time.Second

// run calls reconnect once, and returns, when two answers in a row say the
// session is stale. Other failures (timeouts, a closing connection) are left
// to the connection's own end.
func (w pairingWatch) run(ctx context.Context, h *Host, conn requester) {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	stale := false
	for {
		wait := t.C
		if stale {
			wait = time.After(w.confirm)
		}
		select {
		case <-ctx.Done():
			return
		case <-wait:
		case <-w.kick:
		}
		err := h.publishInventory(ctx, conn)
		h.mu.Lock()
		h.pairingChecks++
		h.mu.Unlock()
		wasStale := stale
		stale = sessionStale(err)
		switch {
		case stale && wasStale:
			h.log.Warn("gateway no longer holds this session as current; reconnecting", "error", err.Error())
			w.reconnect()
			return
		case err != nil:
			h.log.Debug("pairing check failed", "error", err.Error())
		}
	}
}

// pairingCounts reports the connections made and pairing checks answered
// (tests).
func (h *Host) pairingCounts() (hellos, checks int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hellos, h.pairingChecks
}
