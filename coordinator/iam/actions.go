package iam

// Action is a Cedar action of the schema (Action::"DeployAgent").
type Action string

// Action groups: the built-in roles grant a group per Namespace (viewer:
// view; deployer: view and operate; admin: all three); cluster-admin grants
// everything, metrics-reader only ViewMetrics; every authenticated
// principal has the authenticated group.
const (
	GroupView          Action = "view"
	GroupOperate       Action = "operate"
	GroupAdminister    Action = "administer"
	GroupAuthenticated Action = "authenticated"
)

// Actions.
const (
	ViewCluster          Action = "ViewCluster"
	ViewMetrics          Action = "ViewMetrics"
	AdministerCluster    Action = "AdministerCluster"
	CreateNamespace      Action = "CreateNamespace"
	ViewNamespace        Action = "ViewNamespace"
	ViewAudit            Action = "ViewAudit"
	ViewConfiguration    Action = "ViewConfiguration"
	CreateConfiguration  Action = "CreateConfiguration"
	UpdateConfiguration  Action = "UpdateConfiguration"
	ViewAgent            Action = "ViewAgent"
	CreateAgent          Action = "CreateAgent"
	UpdateAgent          Action = "UpdateAgent"
	DeleteAgent          Action = "DeleteAgent"
	DeployAgent          Action = "DeployAgent"
	StopAgent            Action = "StopAgent"
	MessageAgent         Action = "MessageAgent"
	UseCredentialSource  Action = "UseCredentialSource"
	UseServicePrincipal  Action = "UseServicePrincipal"
	ViewServicePrincipal Action = "ViewServicePrincipal"
	CreateSP             Action = "CreateServicePrincipal"
	DeleteSP             Action = "DeleteServicePrincipal"
	ManageTokens         Action = "ManageTokens"
	ViewRoleBindings     Action = "ViewRoleBindings"
	ManageRoleBindings   Action = "ManageRoleBindings"
	ManageUsers          Action = "ManageUsers"
	ViewRestrictions     Action = "ViewRestrictions"
	ManageRestrictions   Action = "ManageRestrictions"
	ViewInstallation     Action = "ViewInstallation"
	WhoAmI               Action = "WhoAmI"

	// The credential sources of a Namespace (docs/credentials.md):
	// viewing their metadata, creating, rotating and withdrawing them, and
	// registering one from an existing location (cluster-admin only).
	ViewCredentialSource     Action = "ViewCredentialSource"
	CreateCredentialSource   Action = "CreateCredentialSource"
	RotateCredentialSource   Action = "RotateCredentialSource"
	WithdrawCredentialSource Action = "WithdrawCredentialSource"
	RegisterCredentialSource Action = "RegisterCredentialSource"
)

// ActionInfo describes an action: its group, the resource types it applies
// to, and the audit action of a denied (or, for cluster operations, a
// successful) attempt.
type ActionInfo struct {
	Group     Action // "" for cluster-admin only
	Resources []string
	// Audit is the audit action a denial of this action records; empty for
	// reads, whose denials are not audited.
	Audit string
	// Context lists the context attributes (name → Cedar type) the action
	// always carries (schema.go declares them).
	Context map[string]string
}

var sp = []string{TypeServicePrincipal}

var cs = []string{TypeCredentialSource}

// actions is the schema's action table.
var actions = map[Action]ActionInfo{
	ViewCluster:         {Resources: []string{TypeCluster}},
	ViewMetrics:         {Resources: []string{TypeCluster}},
	AdministerCluster:   {Resources: []string{TypeCluster}, Audit: "oce.cluster.administer"},
	CreateNamespace:     {Resources: []string{TypeNamespace}, Audit: "oce.namespaces.create"},
	ViewNamespace:       {Group: GroupView, Resources: []string{TypeNamespace}},
	ViewAudit:           {Group: GroupView, Resources: []string{TypeNamespace, TypeCluster}},
	ViewConfiguration:   {Group: GroupView, Resources: []string{TypeConfiguration}},
	CreateConfiguration: {Group: GroupAdminister, Resources: []string{TypeConfiguration}, Audit: "oce.configurations.create"},
	UpdateConfiguration: {Group: GroupAdminister, Resources: []string{TypeConfiguration}, Audit: "oce.configurations.update"},
	ViewAgent:           {Group: GroupView, Resources: []string{TypeAgent}},
	CreateAgent:         {Group: GroupAdminister, Resources: []string{TypeAgent}, Audit: "oce.agents.create"},
	UpdateAgent:         {Group: GroupAdminister, Resources: []string{TypeAgent}, Audit: "oce.agents.update"},
	DeleteAgent:         {Group: GroupAdminister, Resources: []string{TypeAgent}, Audit: "openclaw.agents.lifecycle.delete.request"},
	DeployAgent:         {Group: GroupOperate, Resources: []string{TypeAgent}, Audit: "openclaw.agents.lifecycle.deploy", Context: deployContext},
	StopAgent:           {Group: GroupOperate, Resources: []string{TypeAgent}, Audit: "openclaw.agents.lifecycle.stop.request"},
	// MessageAgent: a turn through the Agent's Gateway, relayed by the
	// coordinator (occ agent send where no gateway socket is local).
	MessageAgent:         {Group: GroupOperate, Resources: []string{TypeAgent}, Audit: "oce.agents.message"},
	UseCredentialSource:  {Group: GroupOperate, Resources: []string{TypeCredentialSource}, Audit: "openclaw.agents.lifecycle.deploy"},
	UseServicePrincipal:  {Group: GroupOperate, Resources: sp, Audit: "openclaw.agents.lifecycle.deploy"},
	ViewServicePrincipal: {Group: GroupView, Resources: sp},
	CreateSP:             {Group: GroupAdminister, Resources: sp, Audit: "oce.serviceprincipals.create"},
	DeleteSP:             {Group: GroupAdminister, Resources: sp, Audit: "oce.serviceprincipals.delete"},
	ManageTokens:         {Group: GroupAdminister, Resources: []string{TypeServicePrincipal, TypeUser}, Audit: "oce.tokens.manage"},
	ViewRoleBindings:     {Group: GroupView, Resources: []string{TypeNamespace, TypeCluster}},
	ManageRoleBindings:   {Group: GroupAdminister, Resources: []string{TypeNamespace, TypeCluster}, Audit: "oce.rolebindings.manage"},
	ManageUsers:          {Resources: []string{TypeUser}, Audit: "oce.users.manage"},
	ViewRestrictions:     {Resources: []string{TypeCluster}},
	ManageRestrictions:   {Resources: []string{TypeRestriction}, Audit: "oce.restrictions.manage"},
	ViewInstallation:     {Group: GroupAuthenticated, Resources: []string{TypeCluster}},
	WhoAmI:               {Group: GroupAuthenticated, Resources: []string{TypeCluster}},

	// A source's metadata is the Namespace's viewers'; its values are
	// written by its admins and never read back by anyone. Registering
	// copies a value from a location outside the Namespace (a Secret of
	// another Kubernetes namespace, a file of the local secrets directory):
	// a cluster administrator's act.
	ViewCredentialSource:     {Group: GroupView, Resources: cs},
	CreateCredentialSource:   {Group: GroupAdminister, Resources: cs, Audit: "oce.credentials.create"},
	RotateCredentialSource:   {Group: GroupAdminister, Resources: cs, Audit: "oce.credentials.rotate"},
	WithdrawCredentialSource: {Group: GroupAdminister, Resources: cs, Audit: "oce.credentials.withdraw"},
	RegisterCredentialSource: {Resources: cs, Audit: "oce.credentials.register"},
}

// deployContext is what a DeployAgent request's context always carries:
// the admitted revision's facts.
var deployContext = map[string]string{
	"harness":           "String", // openclaw | codex
	"mode":              "String", // embedded | dedicated
	"computeId":         "String",
	"harnessAuthMethod": "String", // "" without a binding
	"credentialKind":    "String",
	"credentialSource":  "String", // the sourceRef (canonical spelling), "" without one
	"customEndpoint":    "Bool",   // the custom-endpoint compile applies
	"provider":          "String", // of the primary model
	"model":             "String",
	"plugins":           "Set<String>",
}

// Info returns an action's description.
func Info(a Action) (ActionInfo, bool) {
	i, ok := actions[a]
	return i, ok
}

// Actions lists every action.
func Actions() []Action {
	out := make([]Action, 0, len(actions))
	for a := range actions {
		out = append(out, a)
	}
	return out
}
