package server

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/compute/kubernetes"
	"oce.dev/oce/shared/atomicfile"
)

// DriverMemory is the in-memory test driver (coordinator/compute/memory): it
// realizes nothing, so revisions "run" without runtimes. It is for tests and
// dev data dirs only, and selectable only in a build that registers it (the
// test coordinator: cmd/coordinator built with -tags memorydriver, which
// imports coordinator/server/memorydriver); the production coordinator links
// no test driver.
const DriverMemory = "memory"

// driverFile records, in the data dir, the compute driver the data dir was
// first started with. A revision names its driver (computeId); running the
// same Raft state under another driver would fail or, worse, pretend.
const driverFile = "compute-driver"

// Errors of driver selection.
var (
	// ErrNoDriver: no --driver was given and the data dir is not a dev one.
	ErrNoDriver = errors.New("server: no compute driver selected")
	// ErrDriverMismatch: the data dir belongs to another driver.
	ErrDriverMismatch = errors.New("server: the data dir belongs to another compute driver")
)

// ErrDriverConfig: the compute driver's configuration is unusable.
var ErrDriverConfig = errors.New("server: bad compute driver configuration")

// Closed codes of a refused start, logged as the "coordinator failed"
// record's code (StartCode).
const (
	CodeNotConfigured     = "NOT_CONFIGURED"
	CodeMissingPermission = kubernetes.CodeMissingPermission
	CodeInsecureToken     = "INSECURE_TOKEN_FILE"
	CodeStartFailed       = "START_FAILED"
)

// StartCode classifies an error Run returned.
func StartCode(err error) string {
	switch {
	case errors.Is(err, kubernetes.ErrBadNodeSelector):
		return kubernetes.CodeBadNodeSelector
	case errors.Is(err, ErrDriverConfig), errors.Is(err, kubernetes.ErrConfig), errors.Is(err, ErrNoDriver),
		errors.Is(err, ErrDriverMismatch), errors.Is(err, ErrConsoleSSOConfig):
		return CodeNotConfigured
	case errors.Is(err, kubernetes.ErrMissingPermission):
		return CodeMissingPermission
	case errors.Is(err, ErrInsecureToken):
		return CodeInsecureToken
	}
	return CodeStartFailed
}

// DriverFactory builds a compute driver from the server's configuration.
type DriverFactory func(cfg Config) (compute.Driver, error)

var (
	driversMu sync.Mutex
	drivers   = map[string]DriverFactory{}
)

// RegisterDriver makes a compute driver selectable by --driver name.
func RegisterDriver(name string, f DriverFactory) {
	driversMu.Lock()
	defer driversMu.Unlock()
	drivers[name] = f
}

func registered(name string) bool {
	driversMu.Lock()
	defer driversMu.Unlock()
	_, ok := drivers[name]
	return ok
}

// Drivers lists the registered driver names.
func Drivers() []string {
	driversMu.Lock()
	defer driversMu.Unlock()
	names := make([]string, 0, len(drivers))
	for n := range drivers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// selectDriver applies the data dir rule (docs/OPERATIONS.md, "Compute
// drivers and data directories"):
//
//   - a data dir remembers the driver it was first started with
//     (<data-dir>/compute-driver); naming another one is refused;
//   - with no driver named, the coordinator runs the in-memory test driver
//     only in a dev data dir: a fresh one (no Raft state yet, which then
//     becomes a dev one) or one that recorded the memory driver — and only
//     in a build that has the driver (DriverMemory); without it no driver is
//     selected. A data dir holding state of a real driver — or state from
//     before the record existed — is refused rather than silently emptied
//     of runtimes.
//
// instance reports a driver given as an instance (not from the registry).
func selectDriver(dataDir, named string, instance bool) (string, error) {
	if named != "" && !instance && !registered(named) {
		return "", fmt.Errorf("server: unknown driver %q (have: %s)", named, strings.Join(Drivers(), ", "))
	}
	recorded, err := readDriverFile(dataDir)
	if err != nil {
		return "", err
	}
	switch {
	case named != "" && recorded != "" && named != recorded:
		return "", fmt.Errorf("%w: %s was started with --driver %s, not %s; start it with --driver %s or use a fresh data dir",
			ErrDriverMismatch, dataDir, recorded, named, recorded)
	case named != "":
		return named, writeDriverFile(dataDir, recorded, named)
	case recorded == DriverMemory && registered(DriverMemory):
		return DriverMemory, nil
	case recorded == DriverMemory:
		return "", fmt.Errorf("%w: %s is a dev data dir of the in-memory test driver, which this coordinator build lacks (a test build has it: -tags memorydriver)",
			ErrNoDriver, dataDir)
	case recorded != "":
		return "", fmt.Errorf("%w: %s belongs to the %s driver; start it with --driver %s", ErrNoDriver, dataDir, recorded, recorded)
	case hasRaftState(dataDir):
		return "", fmt.Errorf("%w: %s holds coordinator state but records no driver, so it is not a dev data dir; pass --driver (%s)",
			ErrNoDriver, dataDir, strings.Join(Drivers(), ", "))
	case !registered(DriverMemory):
		return "", fmt.Errorf("%w: pass --driver (%s)", ErrNoDriver, strings.Join(Drivers(), ", "))
	}
	return DriverMemory, writeDriverFile(dataDir, "", DriverMemory)
}

func readDriverFile(dataDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, driverFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("server: read %s: %w", driverFile, err)
	}
	return strings.TrimSpace(string(b)), nil
}

func writeDriverFile(dataDir, recorded, name string) error {
	if recorded == name {
		return nil
	}
	if err := atomicfile.Write(filepath.Join(dataDir, driverFile), []byte(name+"\n"), 0o600); err != nil {
		return fmt.Errorf("server: record the compute driver: %w", err)
	}
	return nil
}

// hasRaftState reports whether the data dir holds a Raft log.
func hasRaftState(dataDir string) bool {
	_, err := os.Stat(filepath.Join(dataDir, "raft.db"))
	return err == nil
}

// newDriver builds the selected compute driver.
func newDriver(cfg Config, name string) (compute.Driver, error) {
	driversMu.Lock()
	f, ok := drivers[name]
	driversMu.Unlock()
	if !ok {
		return nil, fmt.Errorf("server: unknown driver %q (have: %s)", name, strings.Join(Drivers(), ", "))
	}
	d, err := f(cfg)
	if err != nil {
		// A factory's refusal may come with a typed nil driver (a nil
		// *local.Driver in the interface): never keep it, so the way out
		// reports the refusal instead of calling into nil.
		return nil, err
	}
	return d, nil
}
