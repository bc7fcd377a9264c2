package wire

import "encoding/json"

// CreateNamespace is the body of POST /v1/namespaces.
type CreateNamespace struct {
	Name string `json:"name"`
	// Labels are the new Namespace's labels (PUT …/labels replaces them).
	Labels map[string]string `json:"labels,omitempty"`
}

// CreateConfiguration is the body of POST /v1/namespaces/{ns}/configurations.
type CreateConfiguration struct {
	Name     string          `json:"name"`
	Document json.RawMessage `json:"document"`
	// Labels are the new Configuration's labels; PUT of the Configuration
	// keeps them, PUT …/labels replaces them.
	Labels map[string]string `json:"labels,omitempty"`
}

// UpdateConfiguration is the body of PUT /v1/namespaces/{ns}/configurations/{cfg}.
type UpdateConfiguration struct {
	Document json.RawMessage `json:"document"`
}

// CreateAgent is the body of POST /v1/namespaces/{ns}/agents.
// Configuration names the Configuration by id or name in the same Namespace.
type CreateAgent struct {
	Name          string       `json:"name"`
	Configuration string       `json:"configuration"`
	ExecutionMode string       `json:"executionMode,omitempty"`
	HarnessAuth   *HarnessAuth `json:"harnessAuth,omitempty"`
	ComputeID     string       `json:"computeId,omitempty"`
	Plugins       []string     `json:"plugins,omitempty"`
	// Rollback opts the Agent into exact-owner rollback.
	Rollback *RollbackPolicy `json:"rollback,omitempty"`
	// ServicePrincipal names an existing service principal of the
	// Namespace (by name) as the Agent's identity; empty creates one named
	// like the Agent, owned by it.
	ServicePrincipal string `json:"servicePrincipal,omitempty"`
	// Resources are the Agent's requests and limits (absent: defaults).
	Resources *AgentResources `json:"resources,omitempty"`
	// Labels are the new Agent's labels; PATCH keeps them, PUT …/labels
	// replaces them.
	Labels map[string]string `json:"labels,omitempty"`
}

// UpdateAgent is the body of PATCH /v1/namespaces/{ns}/agents/{agent}; omitted
// fields keep their values.
type UpdateAgent struct {
	ExecutionMode *string      `json:"executionMode,omitempty"`
	Configuration *string      `json:"configuration,omitempty"`
	HarnessAuth   *HarnessAuth `json:"harnessAuth,omitempty"`
	ComputeID     *string      `json:"computeId,omitempty"`
	Plugins       *[]string    `json:"plugins,omitempty"`
	// Rollback replaces the rollback policy (enabled false clears it).
	Rollback *RollbackPolicy `json:"rollback,omitempty"`
	// Resources replaces the Agent's requests and limits (an empty object
	// restores the defaults); the next deploy freezes them.
	Resources *AgentResources `json:"resources,omitempty"`
}

// PutLabels is the body of PUT …/labels of a Namespace, a Configuration, an
// Agent or a role binding: the object's labels, replaced as a whole (an
// empty or absent map removes them).
type PutLabels struct {
	Labels map[string]string `json:"labels"`
}

// LabelSelectorParam is the query parameter that filters the lists of
// Namespaces, Configurations, Agents and role bindings by their labels:
// comma-separated key=value (or key==value), key!=value and key terms, all
// of which must hold.
const LabelSelectorParam = "labelSelector"

// Deploy is the optional body of POST …/agents/{agent}/deploy.
type Deploy struct {
	// LogLevel is the runtime log level admission renders (default info).
	LogLevel string `json:"logLevel,omitempty"`
}

// DeployResult is the 202 answer of a deploy: the admitted revision and the
// id of its activate work.
type DeployResult struct {
	Revision
	WorkID string `json:"workId"`
}
