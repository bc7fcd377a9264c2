package server

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/compute/local"
	"oce.dev/oce/coordinator/engine"
	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/runtimes"
)

// LocalConfig configures the local compute driver (--driver local): the
// Agents' runtimes run as processes of this machine, from the same build.
type LocalConfig struct {
	// Root holds the runtimes' directories (runtimes/, routes/); default
	// <DataDir>/local.
	Root string
	// BinDir holds gatewayd, harnessd and nodehost; default the directory
	// of the running executable.
	BinDir string
	// SecretsDir is the shared secrets directory of earlier releases
	// (local:<name> resolved there): a cluster admin registers its files as
	// Namespaces' credential sources; default <Root>/secrets. The sources
	// themselves are files under <Root>/credentials/<namespace id>.
	SecretsDir string
	// ProviderURL points the runtimes' OpenAI and Anthropic endpoints at
	// one provider (the offline fake provider); empty keeps the real ones.
	ProviderURL string
	// AllowHostNetwork lets runtimes run outside a loopback-only network
	// namespace; without it the driver refuses to start there.
	AllowHostNetwork bool
	// LogLevel is the supervisors' OCE_LOG_LEVEL (default info).
	LogLevel string
}

func init() { RegisterDriver(local.Name, newLocalDriver) }

// newLocalDriver reads the pinned runtimes from the shared cache (occ dev
// up and make runtimes install them; the coordinator never installs).
func newLocalDriver(cfg Config) (compute.Driver, error) {
	lc := cfg.Local
	if lc.Root == "" {
		lc.Root = filepath.Join(cfg.DataDir, "local")
	}
	if lc.BinDir == "" {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("server: local driver: %w", err)
		}
		lc.BinDir = filepath.Dir(self)
	}
	if lc.SecretsDir == "" {
		lc.SecretsDir = filepath.Join(lc.Root, "secrets")
	}
	paths, err := runtimes.Load()
	if err != nil {
		return nil, fmt.Errorf("server: local driver: %w", err)
	}
	bins := local.BinariesIn(lc.BinDir)
	for _, b := range []string{bins.Gatewayd, bins.Harnessd, bins.Nodehost} {
		if _, err := os.Stat(b); err != nil {
			return nil, fmt.Errorf("server: local driver: %s not found (make build, or set the bin dir): %w", filepath.Base(b), err)
		}
	}
	var bases map[string]string
	if lc.ProviderURL != "" {
		bases = map[string]string{}
		for _, p := range contract.Providers() {
			bases[p] = lc.ProviderURL
		}
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d, err := local.New(local.Config{DataDir: lc.Root, Binaries: bins, Runtimes: paths, ProviderBaseURLs: bases,
		Credentials: local.CredentialFiles{Dir: filepath.Join(lc.Root, "credentials"), ImportDir: lc.SecretsDir}, AllowHostNetwork: lc.AllowHostNetwork, LogLevel: lc.LogLevel,
		Logger: log.With("component", "compute"), ProbeBeforeCutover: probeBeforeCutover(cfg)})
	if err != nil {
		return nil, fmt.Errorf("server: local driver: %w", err)
	}
	return d, nil
}

// probeBeforeCutover: the before-cutover activation order (the default)
// also runs a staged embedded replacement's model probe before cutover.
func probeBeforeCutover(cfg Config) bool {
	return cfg.Engine.CredentialCheck != engine.CredentialCheckSeed
}
