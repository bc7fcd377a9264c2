package gatewayd

import (
	"context"
	"errors"

	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/phase"
)

// ExitConfigInvalid is the pinned OpenClaw gateway's exit status for a
// configuration it refuses at start (EX_CONFIG, e.g. "Unrecognized key").
// Respawning cannot help: the failure is held at once as NOT_CONFIGURED
// (check CheckConfig), so the coordinator reports it instead of waiting
// through a restart loop.
const ExitConfigInvalid = 78

// CheckConfig is the check a configuration the gateway refuses holds.
const CheckConfig = "gateway-config"

// errConfigInvalid: the gateway exited because its configuration is invalid.
var errConfigInvalid = errors.New("gatewayd: the gateway refused its configuration (exit 78)")

// configInvalid reports whether c exited with ExitConfigInvalid.
func configInvalid(c *child) bool {
	if c == nil {
		return false
	}
	st, done := c.p.Status()
	return done && st.Exited && st.Code == ExitConfigInvalid
}

// holdConfigInvalid holds NOT_CONFIGURED until the stop.
func (g *Gatewayd) holdConfigInvalid(parent context.Context) int {
	g.status.SetReady(false)
	exit, _ := g.hold(parent, CheckConfig, phase.FailCheck(CheckConfig, codes.NotConfigured, errConfigInvalid))
	return exit
}
