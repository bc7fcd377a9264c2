package occ

import (
	"strings"

	"github.com/spf13/cobra"
)

// again spells an occ command line that reaches the same coordinator and
// Namespace as cmd did: the connection flags the user passed (never
// --token: a secret stays out of what we print) and -n, then args. Hints
// like "follow it with: …" use it so a copied line works as it stands.
func (a *app) again(cmd *cobra.Command, args ...string) string {
	return a.spell(cmd, true, args)
}

// againAll is again for a command that spans Namespaces (status): no -n.
func (a *app) againAll(cmd *cobra.Command, args ...string) string {
	return a.spell(cmd, false, args)
}

func (a *app) spell(cmd *cobra.Command, withNS bool, args []string) string {
	parts := []string{"occ"}
	fl := cmd.Flags()
	for _, name := range []string{"context", "server", "ca-file", "tls-server-name", "token-file"} {
		f := fl.Lookup(name)
		if f == nil || !f.Changed || f.Value.String() == "" {
			continue
		}
		if name == "token-file" && f.Value.String() == "-" {
			continue // stdin was read once; the next command needs its own
		}
		parts = append(parts, "--"+name, shellQuote(f.Value.String()))
	}
	if ns := a.settings.Namespace; withNS && ns != "" && (fl.Changed("namespace") || ns != DefaultNamespace) {
		parts = append(parts, "-n", shellQuote(ns))
	}
	for _, s := range args {
		parts = append(parts, shellQuote(s))
	}
	return strings.Join(parts, " ")
}

// shellQuote quotes s for a POSIX shell when it holds anything but plain
// word characters.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@%+=,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
