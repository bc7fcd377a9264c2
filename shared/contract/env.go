package contract

// Environment of every supervisor.
const (
	EnvNamespaceID     = "OCE_NAMESPACE_ID" // exact owner of the workload
	EnvAgentID         = "OCE_AGENT_ID"
	EnvRevisionID      = "OCE_REVISION_ID"
	EnvStatusAddr      = "OCE_STATUS_ADDR"       // private status server listen address
	EnvLogLevel        = "OCE_LOG_LEVEL"         // debug | info | warn | error
	EnvSecretsDir      = "OCE_SECRETS_DIR"       // directory of the secret files below
	EnvStatusTokenFile = "OCE_STATUS_TOKEN_FILE" // bearer of the routes the coordinator calls
	EnvPlugins         = "OCE_PLUGINS"           // comma-separated selected plugin ids
	EnvWorkspaceDir    = "OCE_WORKSPACE_DIR"     // the Agent workspace (embedded Gateway, Harness)
	EnvNPMCache        = "OCE_NPM_CACHE"         // offline npm cache (the codex plugin)
	EnvTmpDir          = "TMPDIR"                // private, mode 0700
	// EnvProviderBaseURLPrefix + a provider (ProviderOpenAI, ProviderAnthropic)
	// overrides that provider's endpoint: tests and the demo point it at the
	// offline fake provider.
	EnvProviderBaseURLPrefix = "OCE_MODEL_PROVIDER_BASE_URL_"
	EnvProviderBaseURLOpenAI = EnvProviderBaseURLPrefix + ProviderOpenAI
	// EnvProviderBaseURLAnthropic overrides the Anthropic endpoint.
	EnvProviderBaseURLAnthropic = EnvProviderBaseURLPrefix + ProviderAnthropic
)

// Provider suffixes of EnvProviderBaseURLPrefix.
const (
	ProviderOpenAI    = "OPENAI"
	ProviderAnthropic = "ANTHROPIC"
)

// Providers lists the provider suffixes.
func Providers() []string { return []string{ProviderOpenAI, ProviderAnthropic} }

// Environment of gatewayd (the Gateway container).
const (
	EnvTopology           = "OCE_TOPOLOGY"           // a Topology
	EnvAdmittedConfig     = "OPENCLAW_CONFIG_PATH"   // the admitted native configuration (read-only)
	EnvGatewayConfigDir   = "OCE_GATEWAY_CONFIG_DIR" // where gatewayd renders the gateway's configuration
	EnvOpenClawStateDir   = "OPENCLAW_STATE_DIR"     // gateway state
	EnvGatewayPort        = "OPENCLAW_GATEWAY_PORT"
	EnvGatewayBind        = "OCE_GATEWAY_BIND"       // BindLAN in Pods, BindLoopback locally
	EnvGatewayPublicURL   = "OCE_GATEWAY_PUBLIC_URL" // the gateway as the Harness sees it (setup codes)
	EnvPeerStatusURL      = "OCE_PEER_STATUS_URL"    // dedicated: the Harness remote-status URL
	EnvAppServerURL       = "OCE_APP_SERVER_URL"     // dedicated Codex: ws://<harness>:AppServerPort
	EnvWorkspaceNodeID    = "OCE_WORKSPACE_NODE_ID"  // dedicated: the enrolled node's device id to pin
	EnvOpenClawBin        = "OCE_OPENCLAW_BIN"       // the openclaw command prefix
	EnvOpenClawMJS        = "OCE_OPENCLAW_MJS"       // the image's openclaw.mjs (when OCE_OPENCLAW_BIN is unset)
	EnvNode               = "OCE_NODE"               // the image's node binary (default: node in PATH)
	EnvNodeWorkspaceDir   = "OCE_NODE_WORKSPACE_DIR" // the workspace root on the node (file-transfer policy)
	EnvRuntimeAssetsSrc   = "OCE_RUNTIME_ASSETS_SOURCE"
	EnvRuntimeAssetsDir   = "OCE_RUNTIME_ASSETS_DIR"
	EnvGatewaydPolicy     = "OCE_GATEWAYD_POLICY"    // test and drill overrides of the deadlines
	EnvSkipChannels       = "OPENCLAW_SKIP_CHANNELS" // the local driver starts no messaging channels
	EnvGatewayPassword    = "OPENCLAW_GATEWAY_PASSWORD"
	EnvPluginStatusKey    = "OCE_PLUGIN_STATUS_KEY" // environment fallback of SecretPluginStatusKey
	EnvAppServerTokenOCE  = "OCE_APP_SERVER_TOKEN"  // environment fallback of SecretAppServerToken
	EnvOpenAIAPIKey       = "OPENAI_API_KEY"
	EnvAnthropicAPIKey    = "ANTHROPIC_API_KEY"
	EnvCodexAPIKey        = "CODEX_API_KEY"
	EnvAppServerToken     = "APP_SERVER_TOKEN"
	EnvCodexAccessToken   = "CODEX_ACCESS_TOKEN"
	EnvCodexLoginMode     = "CODEX_LOGIN_MODE" // a Login* value
	EnvCodexWorkspaceID   = "CODEX_CHATGPT_WORKSPACE_ID"
	EnvCodexHome          = "CODEX_HOME"          // ephemeral: Codex's login state
	EnvCodexStateDir      = "OCE_CODEX_STATE_DIR" // durable Codex thread history, no credential
	EnvNativeConfig       = "OCE_NATIVE_CONFIG"   // the admitted native configuration: a JSON document or a path
	EnvAppServerPort      = "APP_SERVER_PORT"
	EnvAppServerBind      = "OCE_APP_SERVER_BIND" // AppServerBindAll in Pods, AppServerBindLoopback locally
	EnvPodUID             = "OCE_POD_UID"         // the Harness's peer identity
	EnvCodexBin           = "OCE_CODEX_BIN"       // the codex binary (default: codex in PATH)
	EnvNodehostBin        = "OCE_NODEHOST_BIN"
	EnvNodehostStateDir   = "OCE_NODEHOST_STATE_DIR"       // node identity and device token
	EnvNodehostEnrollment = "OCE_NODEHOST_ENROLLMENT_FILE" // the one-use enrollment file (mode 0600)
	EnvNodehostGatewayURL = "OCE_NODEHOST_GATEWAY_URL"     // the gateway as the Harness sees it
	EnvNodehostWorkspace  = "OCE_NODEHOST_WORKSPACE"
	EnvNodehostSkillRoots = "OCE_NODEHOST_SKILL_ROOTS"
	EnvNodehostName       = "OCE_NODEHOST_DISPLAY_NAME"
	EnvNodehostFileOnly   = "OCE_NODEHOST_FILE_ONLY" // "1": the Codex companion serves files only
	EnvNodehostWorkerCmd  = "OCE_NODEHOST_WORKER_COMMAND"
	// EnvNativeWorkerCapacity bounds the native workers a node admits.
	EnvNativeWorkerCapacity = "OPENCLAW_NATIVE_WORKER_CAPACITY"
)

// ProviderKeyEnv maps a provider id of the native configuration to the
// variable its credential travels in when a native program reads nothing
// else.
var ProviderKeyEnv = map[string]string{"openai": EnvOpenAIAPIKey, "anthropic": EnvAnthropicAPIKey}

// Values of EnvGatewayBind and EnvAppServerBind.
const (
	BindLAN               = "lan"
	BindLoopback          = "loopback"
	AppServerBindAll      = "0.0.0.0"
	AppServerBindLoopback = "127.0.0.1"
)

// Values of EnvCodexLoginMode (harnessAuth methods the Harness logs in with).
const (
	LoginAPIKey         = "api_key"
	LoginCodexPAT       = "codex_pat"
	LoginServiceAccount = "chatgpt_service_account"
)

// Embedded model probe before cutover (issue 14; docs/OPERATIONS.md,
// "Activation order"). A driver that stages an embedded replacement while the
// predecessor serves may start the candidate's gatewayd with EnvModelProbeOnly
// = "1": it runs only the model-probe phase (with the candidate's own
// credential and TMPDIR, touching no gateway state), reports ready when the
// probe passed — StatusModelProbe carries when — and holds the failure
// otherwise. At cutover the driver starts the real gatewayd with
// EnvModelProbePassedAt (Unix milliseconds), which skips a probe that passed
// within ModelProbeFreshFor.
const (
	EnvModelProbeOnly     = "OCE_MODEL_PROBE_ONLY"
	EnvModelProbePassedAt = "OCE_MODEL_PROBE_PASSED_AT"
	// StatusModelProbe is the /status section of a probe-only gatewayd:
	// {"code": "READY", "passedAtMs": …}.
	StatusModelProbe = "modelProbe"
)

// EnvCompileCache names a Node compile-cache base filled beforehand for the
// pinned runtime (the gateway image's PathCompileCache; the local driver's
// shared one): gatewayd links it as the OpenClaw launcher's default base
// ($TMPDIR/node-compile-cache) when it holds this runtime's entries or is
// writable (docs/runtime-gatewayd.md, "Compile cache").
const EnvCompileCache = "OCE_COMPILE_CACHE"

// EnvNodehostIdentity names a device identity (ocproto.Identity.Marshal,
// mode 0600) the coordinator provisioned for the Agent's workspace node
// before the revision's Gateway first started, so that Gateway starts
// pinned to it (EnvWorkspaceNodeID) and is never restarted to pin the node
// (issue 23). nodehost adopts it as its identity.
const EnvNodehostIdentity = "OCE_NODEHOST_IDENTITY_FILE"
