package gatewayd

import (
	"os"
	"path/filepath"

	"oce.dev/oce/shared/runtimes"
)

// seedCompileCache makes the prebuilt Node compile cache (OCE_COMPILE_CACHE:
// the image's, filled at build by a warm-up boot of exactly this runtime)
// the OpenClaw launcher's default cache base under TMPDIR before any
// openclaw process starts, so the probe, doctor and the gateway start with
// their modules compiled; without one they share a private cache that the
// first of them fills. One record says what the prebuilt cache offered
// (none, prebuilt, stale — a runtime bump without a rebuilt cache). A
// failure costs only speed: it is logged, never held.
func (g *Gatewayd) seedCompileCache() {
	mjs := openClawMJS(g.cfg.OpenClawCommand)
	if mjs == "" {
		return // not the launcher (a test double)
	}
	base, state, err := runtimes.SeedCompileCache(os.TempDir(), g.cfg.CompileCache, mjs)
	if err != nil {
		g.log.Warn("compile cache unavailable", "reason", "seed-failed")
		return
	}
	g.compileCacheBase = base
	g.log.Info("compile cache", "prebuilt", string(state))
}

// openClawMJS is the launcher script of the openclaw command, "" when the
// command runs something else.
func openClawMJS(cmd []string) string {
	for _, a := range cmd {
		if filepath.Base(a) == "openclaw.mjs" {
			return a
		}
	}
	return ""
}
