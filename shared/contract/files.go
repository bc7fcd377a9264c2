package contract

// Secret file names in EnvSecretsDir: one secret per file, mode 0400 or
// 0600, never logged.
const (
	SecretGatewayPassword  = "gateway-password"   // the Agent's managed gateway password
	SecretStatusToken      = "status-token"       // bearer of RouteSetupCode and RouteNodes
	SecretAppServerToken   = "app-server-token"   // dedicated Codex: app-server capability token
	SecretPluginStatusKey  = "plugin-status-key"  // dedicated: HMAC key of the remote-status bearer
	SecretModelAPIKey      = "model-api-key"      // embedded: the model credential
	SecretOpenAIAPIKey     = "openai-api-key"     // dedicated Codex, api_key login
	SecretCodexAccessToken = "codex-access-token" // dedicated Codex, codex_pat / service account login
)

// SecretCodexWorkspaceID is the key of a chatgpt_service_account login's
// ChatGPT workspace id among the credentials a driver delivers (beside
// SecretCodexAccessToken). It is an identifier, not a credential: drivers
// render it as EnvCodexWorkspaceID, not as a file.
const SecretCodexWorkspaceID = "chatgpt-workspace-id"

// EnrollmentFile is the name of the one-use enrollment file (a setup code)
// a driver delivers to the Harness, mode 0600.
const EnrollmentFile = "enrollment"

// NodeIdentityFile is the name of the provisioned node identity file
// (EnvNodehostIdentity) beside EnrollmentFile, mode 0600.
const NodeIdentityFile = "node-identity"

// Directories of the Agent's Harness claim beside the workspace (the
// Kubernetes subPaths; the local driver's directories): both survive Pod
// and revision replacement and lie outside what the node serves.
const (
	ClaimCodexState = "codex-state" // EnvCodexStateDir: Codex thread history, no credential
	ClaimNodeState  = "node-state"  // EnvNodehostStateDir: node identity and device token
)

// LegacyNodeStateDirName is where the node's state lived inside the
// workspace before it moved to ClaimNodeState; harnessd removes it.
const LegacyNodeStateDirName = ".oce-node"

// Ports inside a workload.
const (
	GatewayPort   = 18789 // the OpenClaw gateway (EnvGatewayPort)
	AppServerPort = 18790 // the Codex app-server (EnvAppServerPort)
	StatusPort    = 18791 // every supervisor's private status server (EnvStatusAddr)
)

// Default in-container paths (the images' layout); the local driver points
// the variables at per-revision directories instead.
const (
	PathSecretsDir       = "/var/run/oce/secrets"
	PathEnrollmentDir    = "/var/run/oce/enrollment"
	PathHome             = "/home/node"
	PathOpenClawState    = "/home/node/.openclaw"
	PathGatewayConfigDir = "/home/node/.openclaw/config"
	PathWorkspace        = "/home/node/workspace"
	PathCodexHome        = "/home/node/.codex"       // on the Pod's emptyDir: login state
	PathCodexState       = "/home/node/.codex-state" // on the workspace claim
	PathAdmittedConfig   = "/etc/openclaw/openclaw.json"
	PathNativeConfig     = "/etc/oce/native-config.json"
	PathNodehostBin      = "/usr/local/bin/nodehost"
	PathNodehostState    = "/home/node/.openclaw-node"
	PathAssetsSource     = "/app/skills"
	PathAssetsDir        = "/home/node/openclaw-runtime-assets/bundled-skills"
	// PathCompileCache is the gateway image's read-only Node compile cache,
	// filled at image build by a warm-up boot (scripts/images.sh).
	PathCompileCache = "/opt/oce/compile-cache"
)
