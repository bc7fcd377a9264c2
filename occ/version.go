package occ

import (
	"fmt"

	"github.com/spf13/cobra"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/shared/buildinfo"
)

// versions is what occ version prints: this client's build and the
// coordinator's (absent with --client).
type versions struct {
	Client wire.Version  `json:"client"`
	Server *wire.Version `json:"server,omitempty"`
}

func wireBuild(b buildinfo.Info) wire.Version {
	return wire.Version{Version: b.Version, Commit: b.Commit, Modified: b.Modified, GoVersion: b.GoVersion,
		Runtimes: wire.Runtimes{Node: b.Runtimes.Node, OpenClaw: b.Runtimes.OpenClaw, Codex: b.Runtimes.Codex}}
}

func (a *app) versionCmd() *cobra.Command {
	var clientOnly bool
	c := &cobra.Command{
		Use:   "version",
		Short: "Show the versions of occ and of the coordinator (commit, Go, pinned runtimes)",
		Example: `  occ version
  occ version --client
  occ version -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := versions{Client: wireBuild(a.build())}
			if !clientOnly {
				ctx, cancel := a.ctx(cmd)
				defer cancel()
				sv, err := a.client().Version(ctx)
				if err != nil {
					return err
				}
				v.Server = &sv
			}
			return a.print(cmd.OutOrStdout(), v, func() table { return versionTable(v) })
		},
	}
	c.Flags().BoolVar(&clientOnly, "client", false, "only this client's version (no server call)")
	return c
}

// build is this binary's build information (Options.Build in tests).
func (a *app) build() buildinfo.Info {
	if a.opts.Build != nil {
		return *a.opts.Build
	}
	return buildinfo.Read()
}

func versionTable(v versions) table {
	t := table{header: []string{"COMPONENT", "VERSION", "COMMIT", "GO", "NODE", "OPENCLAW", "CODEX"}}
	row := func(name string, w wire.Version) {
		commit := short(w.Commit)
		if w.Modified {
			commit += "+dirty"
		}
		t.rows = append(t.rows, []string{name, w.Version, commit, dash(w.GoVersion), w.Runtimes.Node, w.Runtimes.OpenClaw, w.Runtimes.Codex})
		t.names = append(t.names, fmt.Sprintf("%s/%s", name, w.Version))
	}
	row("occ", v.Client)
	if v.Server != nil {
		row("coordinator", *v.Server)
	}
	return t
}
