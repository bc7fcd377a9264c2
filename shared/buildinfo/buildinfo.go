// Package buildinfo reports what a binary was built from: the module
// version, the VCS commit (and whether the tree was modified), the Go
// version, and the pinned native runtime versions the build supervises.
// `occ version` prints the client's and the coordinator's.
package buildinfo

import (
	"runtime/debug"

	"oce.dev/oce/shared/runtimes"
)

// Info describes one binary.
type Info struct {
	Version   string   `json:"version"`            // module version; "(devel)" for a checkout build
	Commit    string   `json:"commit,omitempty"`   // vcs.revision
	Modified  bool     `json:"modified,omitempty"` // vcs.modified: built from a dirty tree
	GoVersion string   `json:"goVersion"`
	Runtimes  Runtimes `json:"runtimes"`
}

// Runtimes are the pinned native runtime versions.
type Runtimes struct {
	Node     string `json:"node"`
	OpenClaw string `json:"openclaw"`
	Codex    string `json:"codex"`
}

// Pinned returns the runtime versions this build pins.
func Pinned() Runtimes {
	return Runtimes{Node: runtimes.NodeVersion, OpenClaw: runtimes.OpenClawVersion, Codex: runtimes.CodexVersion}
}

// Read returns this binary's build information.
func Read() Info {
	info := Info{Version: "(devel)", Runtimes: Pinned()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	info.GoVersion = bi.GoVersion
	if v := bi.Main.Version; v != "" {
		info.Version = v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Commit = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}
