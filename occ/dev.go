package occ

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"oce.dev/oce/shared/proc"
	"oce.dev/oce/shared/relay"
)

// Dev defaults and layout. `occ dev up` runs the same `coordinator` binary
// production runs (with --driver local) and the offline fake provider, as
// processes; occ itself links no coordinator code.
const (
	// DefaultDevDir is the dev data root; its coordinator/token is the token
	// occ reads by default (./.oce/coordinator/token).
	DefaultDevDir = ".oce"
	// DevReadyTimeout bounds `occ dev up`'s wait for the coordinator.
	DevReadyTimeout = 120 * time.Second
	// DevStopTimeout bounds `occ dev down`'s wait for the coordinator, which
	// stops every runtime on the way out: the Gateway's 340 s stop budget
	// plus the Harness's 120 s (docs/design/reference.md#s5-3).
	DevStopTimeout = 460 * time.Second
	// DevProviderTimeout bounds the wait for the fake provider's port.
	DevProviderTimeout = 30 * time.Second
	// DevDemoKey is the secret (a file in <dir>/secrets) holding the key the
	// fake provider accepts; `occ dev up` registers it as credential source
	// demo-key of the default Namespace, which Agents bind with sourceRef
	// credential:demo-key (or local:demo-key).
	DevDemoKey = "demo-key"

	devCoordinatorDir  = "coordinator" // Raft, token, api.sock
	devSecretsDir      = "secrets"     // keys registered as the default Namespace's credential sources
	devStateDir        = "dev"         // logs and pids of what dev up started
	devAPISocket       = "api.sock"
	devPidsFile        = "pids.json"
	devProviderKeyFile = "fakeprovider-keys" // the fake provider's accepted keys (0600)
	devPoll            = 20 * time.Millisecond
	devLeftoverGrace   = 2 * time.Second
	// devHelperStop bounds the stop of the fake provider and the bridge;
	// devRuntimeStop that of a supervisor the coordinator left behind.
	devHelperStop  = 5 * time.Second
	devRuntimeStop = 30 * time.Second
	// devInnerHTTPAddr and devInnerRaftAddr are the coordinator's addresses
	// inside its own network namespace, which nothing else shares.
	devInnerHTTPAddr = "127.0.0.1:7400"
	devInnerRaftAddr = "127.0.0.1:7300"
)

// DevAPISocket is the coordinator API's Unix socket under a dev root.
func DevAPISocket(dir string) string {
	return filepath.Join(dir, devCoordinatorDir, devAPISocket)
}

// devPids records what `occ dev up` started, for `occ dev down`.
type devPids struct {
	Coordinator *proc.Process `json:"coordinator"`
	Provider    *proc.Process `json:"fakeProvider,omitempty"`
	Bridge      *proc.Process `json:"bridge,omitempty"`
	// Namespaced: the coordinator and the fake provider run in their own
	// loopback-only network namespace.
	Namespaced bool   `json:"namespaced"`
	HTTPAddr   string `json:"httpAddr"`
}

func readPids(dir string) (devPids, error) {
	var p devPids
	b, err := os.ReadFile(filepath.Join(dir, devStateDir, devPidsFile))
	if err != nil {
		return p, err
	}
	return p, json.Unmarshal(b, &p)
}

func (a *app) devCmd() *cobra.Command {
	c := &cobra.Command{Use: "dev", Short: "Run oce on this machine: coordinator, local compute driver, fake model provider",
		Example: `  occ dev up                  # start everything in ./.oce
  occ dev down --purge        # stop everything and remove ./.oce`}
	c.AddCommand(a.devUpCmd(), a.devDownCmd(), a.devBridgeCmd())
	return c
}

func (a *app) devDir(flag string) (string, error) {
	d := first(flag, a.opts.Getenv("OCC_DEV_DIR"), DefaultDevDir)
	if !filepath.IsAbs(d) && a.opts.WorkDir != "" {
		d = filepath.Join(a.opts.WorkDir, d)
	}
	return filepath.Abs(d)
}

func (a *app) devUpCmd() *cobra.Command {
	var o devUpOptions
	c := &cobra.Command{
		Use:   "up",
		Short: "Start a single-node coordinator with the local compute driver and the offline fake provider",
		Long: `Installs the pinned runtimes when missing, then starts in the background the coordinator
(the same binary production runs, with --driver local) and the offline fake model provider,
inside a loopback-only network namespace of their own. The coordinator serves its API on a Unix
socket in the data dir, bridged to --http-addr on the host, so every occ command works unchanged.

With OPENAI_API_KEY or ANTHROPIC_API_KEY set, the real provider is used instead; that needs
the host network, which occ refuses unless --allow-host-network is given.`,
		Example: `  occ dev up
  occ dev up --dir /tmp/oce --http-addr 127.0.0.1:7410
  OPENAI_API_KEY=… occ dev up --allow-host-network   # the real provider, no isolation`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := a.devDir(o.dir)
			if err != nil {
				return err
			}
			o.dir = d
			return a.devUp(cmd, o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.dir, "dir", "", "dev data dir (env OCC_DEV_DIR; default ./"+DefaultDevDir+")")
	f.StringVar(&o.binDir, "bin-dir", "", "directory of coordinator, gatewayd, harnessd, nodehost, fakeprovider (default: beside occ)")
	f.StringVar(&o.httpAddr, "http-addr", devInnerHTTPAddr, "host address of the coordinator API")
	f.StringVar(&o.reply, "fake-reply", "", "reply text of the fake model provider")
	f.BoolVar(&o.allowHost, "allow-host-network", false, "run the runtimes on the host network (no isolation; required for a real provider)")
	f.DurationVar(&o.wait, "wait", DevReadyTimeout, "how long to wait for the coordinator")
	return c
}

func (a *app) devDownCmd() *cobra.Command {
	var dir string
	var purge bool
	c := &cobra.Command{
		Use:     "down",
		Short:   "Stop everything `occ dev up` started (data stays unless --purge)",
		Example: "  occ dev down\n  occ dev down --purge",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := a.devDir(dir)
			if err != nil {
				return err
			}
			return devDown(cmd.Context(), cmd.OutOrStdout(), d, purge)
		},
	}
	c.Flags().StringVar(&dir, "dir", "", "dev data dir (env OCC_DEV_DIR; default ./"+DefaultDevDir+")")
	c.Flags().BoolVar(&purge, "purge", false, "also remove the data dir")
	return c
}

// devBridgeCmd is the host side of a namespaced dev coordinator: a loopback
// address forwarded to the API's Unix socket.
func (a *app) devBridgeCmd() *cobra.Command {
	var listen, sock string
	c := &cobra.Command{
		Use:    "bridge",
		Short:  "Forward a host loopback address to the dev coordinator's Unix socket",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			go func() {
				<-cmd.Context().Done()
				ln.Close()
			}()
			return relay.Serve(ln, func() (net.Conn, error) { return net.Dial("unix", sock) })
		},
	}
	c.Flags().StringVar(&listen, "listen", devInnerHTTPAddr, "loopback address to serve")
	c.Flags().StringVar(&sock, "socket", "", "Unix socket to forward to")
	return c
}

// registerDev adds `occ dev` to root and `occ agent send` to its agent command.
func (a *app) registerDev(root *cobra.Command) {
	dev := a.devCmd()
	dev.GroupID = "ops"
	root.AddCommand(dev)
	for _, c := range root.Commands() {
		if c.Name() == "agent" {
			c.AddCommand(a.sendCmd())
		}
	}
}
