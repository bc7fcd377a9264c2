package supervise

import (
	"os"
	"strings"
)

// Env returns base without the variables named in drop (a name ending in
// "*" drops every variable with that prefix) and without malformed entries
// (no "="), for starting later children without credentials. base is not
// modified.
func Env(base []string, drop ...string) []string {
	out := make([]string, 0, len(base))
	for _, kv := range base {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" || matchAny(name, drop) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// MinimalEnv returns only the variables of this process's environment named
// in keep (a name ending in "*" keeps a prefix), in environment order.
func MinimalEnv(keep ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, ok := strings.Cut(kv, "=")
		if ok && name != "" && matchAny(name, keep) {
			out = append(out, kv)
		}
	}
	return out
}

func matchAny(name string, patterns []string) bool {
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(name, prefix) {
				return true
			}
		} else if name == p {
			return true
		}
	}
	return false
}
