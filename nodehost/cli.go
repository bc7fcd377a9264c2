package nodehost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"oce.dev/oce/shared/contract"
	"oce.dev/oce/shared/logging"
)

// Exit codes of the nodehost binary.
const (
	ExitOK       = 0
	ExitError    = 1
	ExitFatal    = 2 // the gateway refused the node (AUTH_*, CLIENT_VERSION_MISMATCH)
	ExitEnroll   = 3 // cannot enroll: insecure, expired or missing enrollment
	ExitBadInput = 4 // bad flags or environment (e.g. worker capacity)
)

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// Command builds the nodehost command tree.
func Command(stdout, stderr io.Writer) *cobra.Command {
	var cfg Config
	var workerCmd, skillRoots string
	root := &cobra.Command{Use: "nodehost", Short: "OpenClaw node: workspace service and session worker admission",
		SilenceUsage: true, SilenceErrors: true}
	run := &cobra.Command{Use: "run", Short: "enroll or reconnect to the gateway and serve commands",
		RunE: func(cmd *cobra.Command, _ []string) error {
			capacity, err := ParseCapacity(os.Getenv(CapacityEnv))
			if err != nil {
				return exitErr(ExitBadInput, err)
			}
			cfg.WorkerCapacity = capacity
			if workerCmd != "" {
				cfg.WorkerCommand = strings.Fields(workerCmd)
			}
			if skillRoots != "" {
				cfg.SkillRoots = strings.Split(skillRoots, ":")
			}
			cfg.Log = logging.New(stderr, slog.LevelInfo, "nodehost")
			h, err := New(cfg)
			if errors.Is(err, ErrStateServed) {
				return exitErr(ExitBadInput, err)
			}
			if err != nil {
				return exitErr(ExitError, err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			err = h.Run(ctx)
			switch {
			case err == nil:
				return nil
			case errors.Is(err, ErrFatal):
				return exitErr(ExitFatal, err)
			case errors.Is(err, ErrEnrollmentInsecure), errors.Is(err, ErrEnrollmentExpired), errors.Is(err, ErrNotEnrolled):
				return exitErr(ExitEnroll, err)
			}
			return exitErr(ExitError, err)
		}}
	f := run.Flags()
	f.StringVar(&cfg.StateDir, "state-dir", envOr(contract.EnvNodehostStateDir, contract.PathNodehostState), "private state directory (identity, device token)")
	f.StringVar(&cfg.Workspace, "workspace", envOr(contract.EnvNodehostWorkspace, contract.PathWorkspace), "Agent workspace served by this node")
	f.StringVar(&skillRoots, "skill-roots", os.Getenv(contract.EnvNodehostSkillRoots), "colon-separated managed Skill roots (read-only)")
	f.StringVar(&cfg.EnrollmentFile, "enrollment-file", os.Getenv(contract.EnvNodehostEnrollment), "one-use setup code file (mode 0600)")
	f.StringVar(&cfg.IdentityFile, "identity-file", os.Getenv(contract.EnvNodehostIdentity), "device identity the coordinator provisioned (mode 0600); adopted, then deleted")
	f.StringVar(&cfg.GatewayURL, "gateway-url", os.Getenv(contract.EnvNodehostGatewayURL), "gateway URL as seen from this node (overrides the setup code's)")
	f.StringVar(&cfg.DisplayName, "display-name", envOr(contract.EnvNodehostName, "oce-nodehost"), "display name")
	f.BoolVar(&cfg.FileOnly, "file-only", os.Getenv(contract.EnvNodehostFileOnly) == "1", "serve only workspace file commands (the Codex companion node)")
	f.StringVar(&workerCmd, "worker-command", os.Getenv(contract.EnvNodehostWorkerCmd), "session worker command; enables worker admission (capacity from "+CapacityEnv+")")

	var stateDir string
	var asJSON bool
	identity := &cobra.Command{Use: "identity", Short: "print the device identity (the native worker readiness check)",
		RunE: func(*cobra.Command, []string) error {
			id, err := IdentityDeviceID(stateDir)
			if err != nil {
				return exitErr(ExitError, fmt.Errorf("no device identity: %w", err))
			}
			if asJSON {
				return json.NewEncoder(stdout).Encode(map[string]string{"deviceId": id})
			}
			_, err = fmt.Fprintln(stdout, id)
			return err
		}}
	identity.Flags().StringVar(&stateDir, "state-dir", envOr(contract.EnvNodehostStateDir, contract.PathNodehostState), "private state directory")
	identity.Flags().BoolVar(&asJSON, "json", false, "print {deviceId} as JSON")
	root.AddCommand(run, identity)
	return root
}

type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitErr(code int, err error) error { return &exitError{code: code, err: err} }

// Main runs the nodehost CLI and returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := Command(stdout, stderr)
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "nodehost:", err)
		var ee *exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		return ExitBadInput
	}
	return ExitOK
}
