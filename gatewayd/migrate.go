package gatewayd

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"

	_ "modernc.org/sqlite" // read-only user_version checks
)

// AgentDatabaseGlob locates the agent SQLite databases below the state dir
// (openclaw 2026.9.6: agents/<agentId>/agent/openclaw-agent.sqlite).
const AgentDatabaseGlob = "agents/*/agent/openclaw-agent.sqlite"

// ErrDatabaseUnreadable reports an agent database whose user_version cannot
// be read.
var ErrDatabaseUnreadable = errors.New("gatewayd: agent database unreadable")

// DatabaseVersion is one agent database and its user_version.
type DatabaseVersion struct {
	Path        string
	UserVersion int
}

// AgentDatabases lists the agent databases under stateDir, sorted.
func AgentDatabases(stateDir string) ([]string, error) {
	m, err := filepath.Glob(filepath.Join(stateDir, AgentDatabaseGlob))
	if err != nil {
		return nil, err
	}
	sort.Strings(m)
	return m, nil
}

// UserVersion opens path read-only (never creating or writing it) and
// returns PRAGMA user_version.
func UserVersion(ctx context.Context, path string) (int, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrDatabaseUnreadable, err)
	}
	if !st.Mode().IsRegular() {
		return 0, fmt.Errorf("%w: not a regular file", ErrDatabaseUnreadable)
	}
	u := url.URL{Scheme: "file", Path: path, RawQuery: "mode=ro&_pragma=query_only(1)"}
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrDatabaseUnreadable, err)
	}
	defer db.Close()
	var v int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrDatabaseUnreadable, err)
	}
	return v, nil
}

// NeedsMigration is the state-migration decision: doctor runs only when some
// agent database has 0 < user_version < AgentDatabaseSchemaVersion.
func NeedsMigration(ctx context.Context, stateDir string) (bool, []DatabaseVersion, error) {
	paths, err := AgentDatabases(stateDir)
	if err != nil {
		return false, nil, err
	}
	var out []DatabaseVersion
	need := false
	for _, p := range paths {
		v, err := UserVersion(ctx, p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return false, out, err
		}
		out = append(out, DatabaseVersion{Path: p, UserVersion: v})
		if v > 0 && v < AgentDatabaseSchemaVersion {
			need = true
		}
	}
	return need, out, nil
}
