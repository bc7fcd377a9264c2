package api

// HeldOf exposes heldOf to the external tests.
var HeldOf = heldOf

// DryRunRoutes lists the routes that accept ?dryRun=server.
func DryRunRoutes() []string {
	out := make([]string, 0, len(dryRunRoutes))
	for p := range dryRunRoutes {
		out = append(out, p)
	}
	return out
}
