package memory

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"oce.dev/oce/coordinator/compute"
)

// A shared driver keeps its runtime records and routes in a directory that
// every coordinator process of a multi-process test names: the runtimes are
// outside any one member, as a real cluster's are, so a new leader observes
// what its predecessor started instead of finding nothing and reporting
// every Agent degraded. Fault rules, hooks and the call log stay per
// process. Each operation holds an exclusive flock on the directory while
// it reads and rewrites its records, so members never interleave halves of
// one operation.

// sharedDir is the directory of a shared driver.
type sharedDir struct {
	dir  string
	lock *os.File
}

// NewShared returns a driver with caps whose runtime records and routes
// live in dir (created if missing), shared with every process naming it.
func NewShared(caps compute.Capabilities, dir string) (*Driver, error) {
	for _, sub := range []string{"runtimes", "routes"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, fmt.Errorf("memory: shared dir: %w", err)
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("memory: shared dir: %w", err)
	}
	d := New(caps)
	d.shared = &sharedDir{dir: dir, lock: f}
	return d, nil
}

// Close releases the shared directory's lock file.
func (d *Driver) Close() error {
	if d.shared == nil {
		return nil
	}
	return d.shared.lock.Close()
}

// locked runs f under the directory's exclusive lock.
func (s *sharedDir) locked(f func() error) error {
	fd := int(s.lock.Fd())
	if err := syscall.Flock(fd, syscall.LOCK_EX); err != nil {
		return fmt.Errorf("memory: lock shared dir: %w", err)
	}
	defer func() { _ = syscall.Flock(fd, syscall.LOCK_UN) }()
	return f()
}

// path names a record file; ids are hex-encoded, so any id is a safe name.
func (s *sharedDir) path(kind, id string) string {
	return filepath.Join(s.dir, kind, hex.EncodeToString([]byte(id)))
}

func (s *sharedDir) read(kind, id string, v any) (bool, error) {
	b, err := os.ReadFile(s.path(kind, id))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("memory: shared %s %s: %w", kind, id, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("memory: shared %s %s: %w", kind, id, err)
	}
	return true, nil
}

// write replaces a record through a renamed temporary file, so a process
// killed mid-write leaves the old record. No fsync: the directory outlives
// processes, not the machine.
func (s *sharedDir) write(kind, id string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	p := s.path(kind, id)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("memory: shared %s %s: %w", kind, id, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("memory: shared %s %s: %w", kind, id, err)
	}
	return nil
}

func (s *sharedDir) remove(kind, id string) error {
	if err := os.Remove(s.path(kind, id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("memory: shared %s %s: %w", kind, id, err)
	}
	return nil
}

// record runs f on revision revID's runtime record and, when agentID is not
// empty, on the Agent's route ("" for none), under d.mu. A shared driver
// loads both from its directory first and writes back what f changed, all
// under the directory's lock; an I/O error fails the operation.
func (d *Driver) record(revID, agentID string, f func(r *Runtime, route *string)) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.shared == nil {
		var r Runtime
		var route string
		p, had := d.runtimes[revID]
		if had {
			r = *p
		}
		if agentID != "" {
			route = d.routes[agentID]
		}
		was := r
		f(&r, &route)
		if revID != "" && (had || r != was) { // a read creates no record
			*d.runtime(revID) = r
		}
		if agentID != "" {
			if route == "" {
				delete(d.routes, agentID)
			} else {
				d.routes[agentID] = route
			}
		}
		return nil
	}
	return d.shared.locked(func() error {
		var r Runtime
		var route string
		if revID != "" {
			if _, err := d.shared.read("runtimes", revID, &r); err != nil {
				return err
			}
		}
		if agentID != "" {
			if _, err := d.shared.read("routes", agentID, &route); err != nil {
				return err
			}
		}
		was, wasRoute := r, route
		f(&r, &route)
		if revID != "" && r != was {
			if err := d.shared.write("runtimes", revID, r); err != nil {
				return err
			}
		}
		if agentID != "" && route != wasRoute {
			if route == "" {
				return d.shared.remove("routes", agentID)
			}
			return d.shared.write("routes", agentID, route)
		}
		return nil
	})
}

// Open returns a driver with the default capabilities: its records live in
// this process, or in dir (NewShared), shared by every process naming it.
func Open(dir string) (*Driver, error) {
	if dir != "" {
		return NewShared(DefaultCapabilities(), dir)
	}
	return New(DefaultCapabilities()), nil
}
