package server

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"oce.dev/oce/shared/atomicfile"
)

// nodeIDFile persists a node id chosen by default, so restarts keep it.
const nodeIDFile = "node-id"

// resolveNodeID returns the configured id, else the one persisted in the
// data dir, else the host name (persisted for the next start).
func resolveNodeID(dataDir, configured string) (string, error) {
	path := filepath.Join(dataDir, nodeIDFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		persisted := strings.TrimSpace(string(b))
		if configured != "" && configured != persisted {
			return "", fmt.Errorf("server: node id %q does not match %q stored in the data dir", configured, persisted)
		}
		return persisted, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("server: read node id: %w", err)
	}
	id := configured
	if id == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "node-1"
		}
		id = h
	}
	if err := atomicfile.Write(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("server: persist node id: %w", err)
	}
	return id, nil
}
