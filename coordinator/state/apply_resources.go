package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Resource commands: Namespaces, Configurations, Agents, admission and the
// stop/delete requests.

func utc(t time.Time) time.Time { return t.UTC().Round(0) }

// compactDocument validates and canonicalizes a native document so the
// stored bytes (and so the snapshot) do not depend on the client's spacing.
func compactDocument(doc json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(doc)) == 0 || bytes.Equal(bytes.TrimSpace(doc), []byte("null")) {
		return nil, fmt.Errorf("%w: document is required", ErrInvalid)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, doc); err != nil {
		return nil, fmt.Errorf("%w: document: %w", ErrInvalid, err)
	}
	return buf.Bytes(), nil
}

func validMode(m string) bool { return m == ModeEmbedded || m == ModeDedicated }

func applyCreateNamespace(d *data, c Command, p CreateNamespace) (Namespace, error) {
	if p.ID == "" || p.Name == "" {
		return Namespace{}, fmt.Errorf("%w: id and name are required", ErrInvalid)
	}
	if _, ok := d.namespaces[p.ID]; ok {
		return Namespace{}, fmt.Errorf("%w: namespace %q exists", ErrConflict, p.ID)
	}
	if _, ok := d.nsByName[p.Name]; ok {
		return Namespace{}, fmt.Errorf("%w: namespace name %q is taken", ErrConflict, p.Name)
	}
	if err := ValidateLabels(p.Labels); err != nil {
		return Namespace{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	ns := Namespace{ID: p.ID, Name: p.Name, CreatedAt: c.Time, Labels: cloneLabels(p.Labels)}
	d.putNamespace(ns)
	d.audit3(c, AuditNamespaceCreate, NamespaceResource(ns.Name), ns.ID, "", nil)
	return ns, nil
}

func applySetNamespaceQuota(d *data, c Command, p SetNamespaceQuota) (Namespace, error) {
	ns, ok := d.namespaces[p.NamespaceID]
	if !ok {
		return Namespace{}, fmt.Errorf("%w: namespace %q", ErrNotFound, p.NamespaceID)
	}
	if p.Quota != nil && p.Quota.Agents < 0 {
		return Namespace{}, fmt.Errorf("%w: quota agents %d", ErrInvalid, p.Quota.Agents)
	}
	ns.Quota = p.Quota
	ns = cloneNamespace(ns)
	d.namespaces[ns.ID] = ns
	d.audit3(c, AuditNamespaceQuota, NamespaceResource(ns.Name), ns.ID, "", quotaDetails(ns.Quota))
	return cloneNamespace(ns), nil
}

// quotaDetails is a quota as audit details (nil: removed).
func quotaDetails(q *NamespaceQuota) map[string]string {
	if q == nil {
		return map[string]string{"quota": "none"}
	}
	out := map[string]string{}
	for k, v := range map[string]string{"cpu": q.CPU, "memory": q.Memory, "storage": q.Storage} {
		if v != "" {
			out[k] = v
		}
	}
	if q.Agents > 0 {
		out["agents"] = fmt.Sprint(q.Agents)
	}
	return out
}

func applyDeleteNamespace(d *data, c Command, p DeleteNamespace) (Namespace, error) {
	ns, ok := d.namespaces[p.ID]
	if !ok {
		return Namespace{}, fmt.Errorf("%w: namespace %q", ErrNotFound, p.ID)
	}
	if n := len(d.nsAgents[p.ID]); n > 0 {
		return Namespace{}, fmt.Errorf("%w: namespace %q still holds %d agent(s): delete them first", ErrConflict, ns.Name, n)
	}
	cfgs := 0
	for _, c := range d.configurations {
		if c.NamespaceID == p.ID {
			cfgs++
		}
	}
	if cfgs > 0 {
		return Namespace{}, fmt.Errorf("%w: namespace %q still holds %d configuration(s): delete them first", ErrConflict, ns.Name, cfgs)
	}
	if n := d.credentialsIn(p.ID); n > 0 {
		return Namespace{}, fmt.Errorf("%w: namespace %q still holds %d credential source(s): withdraw them first", ErrConflict, ns.Name, n)
	}
	sps, bindings := 0, 0
	for _, sp := range d.ids.sps {
		if sp.NamespaceID == p.ID {
			sps++
		}
	}
	for _, b := range d.ids.bindings {
		if b.NamespaceID == p.ID {
			bindings++
		}
	}
	if sps > 0 || bindings > 0 {
		return Namespace{}, fmt.Errorf("%w: namespace %q still holds %d service principal(s) and %d role binding(s): delete them first",
			ErrConflict, ns.Name, sps, bindings)
	}
	delete(d.namespaces, p.ID)
	delete(d.nsByName, ns.Name)
	delete(d.nsAgents, p.ID)
	d.audit3(c, AuditNamespaceDelete, NamespaceResource(ns.Name), ns.ID, "", nil)
	return ns, nil
}

func applyDeleteConfiguration(d *data, cmd Command, p DeleteConfiguration) (Configuration, error) {
	c, ok := d.configurations[p.ID]
	if !ok {
		return Configuration{}, fmt.Errorf("%w: configuration %q", ErrNotFound, p.ID)
	}
	users := 0
	for id := range d.nsAgents[c.NamespaceID] {
		if d.agents[id].ConfigurationID == p.ID {
			users++
		}
	}
	if users > 0 {
		return Configuration{}, fmt.Errorf("%w: configuration %q is used by %d agent(s): point them elsewhere or delete them first", ErrConflict, c.Name, users)
	}
	delete(d.configurations, p.ID)
	delete(d.cfgByName, nameKey{c.NamespaceID, c.Name})
	d.audit3(cmd, AuditConfigurationDelete, ScopedResource("Configuration", d.nsName(c.NamespaceID), c.Name), c.NamespaceID, "", nil)
	return cloneConfiguration(c), nil
}

func applyPutConfiguration(d *data, c Command, p PutConfiguration) (Configuration, error) {
	if p.ID == "" || p.NamespaceID == "" || p.Name == "" {
		return Configuration{}, fmt.Errorf("%w: id, namespaceId and name are required", ErrInvalid)
	}
	doc, err := compactDocument(p.Document)
	if err != nil {
		return Configuration{}, err
	}
	if err := ValidateLabels(p.Labels); err != nil {
		return Configuration{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if _, ok := d.namespaces[p.NamespaceID]; !ok {
		return Configuration{}, fmt.Errorf("%w: namespace %q", ErrNotFound, p.NamespaceID)
	}
	prev, exists := d.configurations[p.ID]
	if exists && prev.NamespaceID != p.NamespaceID {
		return Configuration{}, fmt.Errorf("%w: configuration %q belongs to another namespace", ErrConflict, p.ID)
	}
	if id, ok := d.cfgByName[nameKey{p.NamespaceID, p.Name}]; ok && id != p.ID {
		return Configuration{}, fmt.Errorf("%w: configuration name %q is taken", ErrConflict, p.Name)
	}
	cf := Configuration{ID: p.ID, NamespaceID: p.NamespaceID, Name: p.Name, Generation: 1,
		Document: doc, CreatedAt: c.Time, UpdatedAt: c.Time, Labels: cloneLabels(p.Labels)}
	action := AuditConfigurationCreate
	if exists {
		cf.Generation = prev.Generation + 1
		cf.CreatedAt = prev.CreatedAt
		cf.Labels = prev.Labels
		action = AuditConfigurationUpdate
	}
	d.putConfiguration(cf)
	d.audit3(c, action, ScopedResource("Configuration", d.nsName(cf.NamespaceID), cf.Name), cf.NamespaceID, "",
		map[string]string{"generation": strconv.FormatInt(cf.Generation, 10)})
	return cloneConfiguration(cf), nil
}

func applyCreateAgent(d *data, c Command, p CreateAgent) (Agent, error) {
	if p.ID == "" || p.NamespaceID == "" || p.Name == "" || p.ConfigurationID == "" {
		return Agent{}, fmt.Errorf("%w: id, namespaceId, name and configurationId are required", ErrInvalid)
	}
	mode := p.ExecutionMode
	if mode == "" {
		mode = ModeEmbedded
	}
	if !validMode(mode) {
		return Agent{}, fmt.Errorf("%w: execution mode %q", ErrInvalid, mode)
	}
	if _, ok := d.namespaces[p.NamespaceID]; !ok {
		return Agent{}, fmt.Errorf("%w: namespace %q", ErrNotFound, p.NamespaceID)
	}
	if cf, ok := d.configurations[p.ConfigurationID]; !ok || cf.NamespaceID != p.NamespaceID {
		return Agent{}, fmt.Errorf("%w: configuration %q in namespace %q", ErrNotFound, p.ConfigurationID, p.NamespaceID)
	}
	if _, ok := d.agents[p.ID]; ok {
		return Agent{}, fmt.Errorf("%w: agent %q exists", ErrConflict, p.ID)
	}
	if _, ok := d.agentByName[nameKey{p.NamespaceID, p.Name}]; ok {
		return Agent{}, fmt.Errorf("%w: agent name %q is taken", ErrConflict, p.Name)
	}
	if err := validPolicy(p.Rollback); err != nil {
		return Agent{}, err
	}
	if err := ValidateLabels(p.Labels); err != nil {
		return Agent{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	d.act.setPolicy(p.ID, p.Rollback)
	a := Agent{ID: p.ID, NamespaceID: p.NamespaceID, Name: p.Name, ExecutionMode: mode,
		ConfigurationID: p.ConfigurationID, HarnessAuth: cloneAuth(p.HarnessAuth), ComputeID: p.ComputeID,
		Plugins: cloneStrings(p.Plugins), Resources: cloneResources(p.Resources), CreatedAt: c.Time, UpdatedAt: c.Time,
		Labels: cloneLabels(p.Labels)}
	if err := d.agentServicePrincipal(c, p, &a); err != nil {
		return Agent{}, err
	}
	d.addAgent(a)
	d.audit3(c, AuditAgentCreate, d.agentResource(a), a.NamespaceID, a.ID, nil)
	return cloneAgent(a), nil
}

func applyUpdateAgent(d *data, c Command, p UpdateAgent) (Agent, error) {
	a, ok := d.agents[p.AgentID]
	if !ok {
		return Agent{}, fmt.Errorf("%w: agent %q", ErrNotFound, p.AgentID)
	}
	if a.Deleting {
		return Agent{}, fmt.Errorf("%w: agent %q is being deleted", ErrConflict, a.ID)
	}
	if err := validPolicy(p.Rollback); err != nil && p.Rollback.Enabled {
		return Agent{}, err
	}
	if p.ExecutionMode != nil && !validMode(*p.ExecutionMode) {
		return Agent{}, fmt.Errorf("%w: execution mode %q", ErrInvalid, *p.ExecutionMode)
	}
	if p.ConfigurationID != nil {
		if cf, ok := d.configurations[*p.ConfigurationID]; !ok || cf.NamespaceID != a.NamespaceID {
			return Agent{}, fmt.Errorf("%w: configuration %q in namespace %q", ErrNotFound, *p.ConfigurationID, a.NamespaceID)
		}
	}
	a = p.Applied(a)
	if p.Rollback != nil {
		d.act.setPolicy(a.ID, p.Rollback)
	}
	a.UpdatedAt = c.Time
	d.agents[a.ID] = a
	d.audit3(c, AuditAgentUpdate, d.agentResource(a), a.NamespaceID, a.ID, nil)
	return cloneAgent(a), nil
}

func maxAttempts(n int) (int, error) {
	if n < 0 {
		return 0, fmt.Errorf("%w: maxAttempts %d", ErrInvalid, n)
	}
	if n == 0 {
		return DefaultMaxAttempts, nil
	}
	return n, nil
}

func applyAdmitRevision(d *data, c Command, p AdmitRevision) (Admitted, error) {
	r := p.Revision
	if r.ID == "" || r.AgentID == "" || p.WorkID == "" {
		return Admitted{}, fmt.Errorf("%w: revision id, agentId and workId are required", ErrInvalid)
	}
	if !validMode(r.Mode) {
		return Admitted{}, fmt.Errorf("%w: revision mode %q", ErrInvalid, r.Mode)
	}
	if r.Harness.ID != HarnessOpenClaw && r.Harness.ID != HarnessCodex {
		return Admitted{}, fmt.Errorf("%w: harness %q", ErrInvalid, r.Harness.ID)
	}
	doc, err := compactDocument(r.Document)
	if err != nil {
		return Admitted{}, err
	}
	ma, err := maxAttempts(p.MaxAttempts)
	if err != nil {
		return Admitted{}, err
	}
	a, ok := d.agents[r.AgentID]
	if !ok {
		return Admitted{}, fmt.Errorf("%w: agent %q", ErrNotFound, r.AgentID)
	}
	if r.NamespaceID != a.NamespaceID {
		return Admitted{}, fmt.Errorf("%w: revision namespace %q is not the agent's", ErrInvalid, r.NamespaceID)
	}
	if a.Deleting {
		return Admitted{}, fmt.Errorf("%w: agent %q is being deleted", ErrConflict, a.ID)
	}
	if _, ok := d.revisions[r.ID]; ok {
		return Admitted{}, fmt.Errorf("%w: revision %q exists", ErrConflict, r.ID)
	}
	if _, ok := d.work[p.WorkID]; ok {
		return Admitted{}, fmt.Errorf("%w: work %q exists", ErrConflict, p.WorkID)
	}
	cf, ok := d.configurations[r.ConfigurationID]
	if !ok {
		return Admitted{}, fmt.Errorf("%w: configuration %q", ErrNotFound, r.ConfigurationID)
	}
	if r.ConfigurationID != a.ConfigurationID {
		return Admitted{}, fmt.Errorf("%w: agent %q now uses configuration %q", ErrConflict, a.ID, a.ConfigurationID)
	}
	if r.Mode != a.ExecutionMode {
		return Admitted{}, fmt.Errorf("%w: agent %q now runs %s, admission froze %s", ErrConflict, a.ID, a.ExecutionMode, r.Mode)
	}
	if r.ServicePrincipalID != a.ServicePrincipalID {
		return Admitted{}, fmt.Errorf("%w: agent %q now has service principal %q, admission froze %q", ErrConflict, a.ID,
			a.ServicePrincipalID, r.ServicePrincipalID)
	}
	if cf.Generation != r.ConfigurationGeneration {
		return Admitted{}, fmt.Errorf("%w: configuration %q is at generation %d, admission saw %d",
			ErrConflict, cf.ID, cf.Generation, r.ConfigurationGeneration)
	}
	a.RevisionCount++
	a.UpdatedAt = c.Time
	r.Number = a.RevisionCount
	r.Document = doc
	r.Status = RevisionPending
	r.FailureCode, r.FailureDetail = "", ""
	r.CreatedAt = c.Time
	r.HarnessAuth = cloneAuth(r.HarnessAuth)
	r.Plugins = cloneStrings(r.Plugins)
	w := Work{ID: p.WorkID, Kind: WorkActivate, NamespaceID: a.NamespaceID, AgentID: a.ID, RevisionID: r.ID,
		State: WorkQueued, Phase: PhaseQueued, MaxAttempts: ma, AvailableAt: c.Time, Actor: c.Actor,
		CreatedAt: c.Time, UpdatedAt: c.Time, ActorGroups: cloneStrings(p.ActorGroups)}
	d.agents[a.ID] = a
	d.addRevision(r)
	d.putWork(w)
	d.appendAudit(c.Time, c.Actor, AuditDeploy, a, r.ID, map[string]string{"number": strconv.FormatInt(r.Number, 10), "workId": w.ID})
	return Admitted{Revision: cloneRevision(r), WorkID: w.ID}, nil
}

func applyRequestStop(d *data, c Command, p RequestStop) (Work, error) {
	w, err := requestWork(d, c, p.AgentID, p.WorkID, p.MaxAttempts, WorkStop, p.ActorGroups)
	if err == nil {
		d.requestCancels(c, p.AgentID) // a stop cancels a pending activation
	}
	return w, err
}

func applyRequestDelete(d *data, c Command, p RequestDelete) (Work, error) {
	return requestWork(d, c, p.AgentID, p.WorkID, p.MaxAttempts, WorkDelete, p.ActorGroups)
}

// requestWork enqueues stop or delete work; delete also marks the Agent
// deleting so no further revision is admitted.
func requestWork(d *data, c Command, agentID, workID string, n int, kind string, groups []string) (Work, error) {
	if agentID == "" || workID == "" {
		return Work{}, fmt.Errorf("%w: agentId and workId are required", ErrInvalid)
	}
	ma, err := maxAttempts(n)
	if err != nil {
		return Work{}, err
	}
	a, ok := d.agents[agentID]
	if !ok {
		return Work{}, fmt.Errorf("%w: agent %q", ErrNotFound, agentID)
	}
	if a.Deleting {
		return Work{}, fmt.Errorf("%w: agent %q is being deleted", ErrConflict, a.ID)
	}
	if _, ok := d.work[workID]; ok {
		return Work{}, fmt.Errorf("%w: work %q exists", ErrConflict, workID)
	}
	w := Work{ID: workID, Kind: kind, NamespaceID: a.NamespaceID, AgentID: a.ID, RevisionID: a.ActiveRevisionID,
		State: WorkQueued, Phase: PhaseQueued, MaxAttempts: ma, AvailableAt: c.Time, Actor: c.Actor,
		CreatedAt: c.Time, UpdatedAt: c.Time, ActorGroups: cloneStrings(groups)}
	action := AuditStopRequest
	if kind == WorkDelete {
		a.Deleting = true
		a.UpdatedAt = c.Time
		d.agents[a.ID] = a
		action = AuditDeleteRequest
	}
	d.putWork(w)
	d.audit3(c, action, d.agentResource(a), a.NamespaceID, a.ID, map[string]string{"workId": w.ID})
	return w, nil
}

func applySetInstallation(d *data, _ Command, p SetInstallation) (Installation, error) {
	d.installation = p.Installation
	return p.Installation, nil
}

// appendAudit appends one record with the next Seq.
func (d *data) appendAudit(t time.Time, actor, action string, a Agent, revisionID string, details map[string]string) {
	d.auditSeq++
	outcome := OutcomeSuccess
	if action == AuditFail {
		outcome = OutcomeFailure
	}
	d.audit = append(d.audit, AuditRecord{Seq: d.auditSeq, Time: t, Action: action, Actor: actor,
		NamespaceID: a.NamespaceID, AgentID: a.ID, RevisionID: revisionID, Details: details,
		Resource: d.agentResource(a), Outcome: outcome})
}

// agentResource is the resource name of an Agent.
func (d *data) agentResource(a Agent) string {
	return ScopedResource("Agent", d.nsName(a.NamespaceID), a.Name)
}

// agentServicePrincipal sets a new Agent's ServicePrincipal: an existing one
// of its Namespace, or a new one it owns.
func (d *data) agentServicePrincipal(c Command, p CreateAgent, a *Agent) error {
	if p.ServicePrincipalID == "" {
		if p.OwnServicePrincipal {
			return fmt.Errorf("%w: ownServicePrincipal needs a servicePrincipalId", ErrInvalid)
		}
		return nil
	}
	if p.OwnServicePrincipal {
		sp, err := d.newServicePrincipal(c, p.ServicePrincipalID, a.NamespaceID, a.Name, a.ID)
		if err != nil {
			return err
		}
		a.ServicePrincipalID = sp.ID
		return nil
	}
	sp, ok := d.ids.sps[p.ServicePrincipalID]
	if !ok || sp.NamespaceID != a.NamespaceID {
		return fmt.Errorf("%w: service principal %q in namespace %q", ErrNotFound, p.ServicePrincipalID, a.NamespaceID)
	}
	if sp.AgentID != "" {
		return fmt.Errorf("%w: service principal %q belongs to another agent", ErrConflict, sp.Name)
	}
	a.ServicePrincipalID = sp.ID
	return nil
}
