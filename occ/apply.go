package occ

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
)

// What apply does to an object, as it prints it.
const (
	actionCreated    = "created"
	actionConfigured = "configured"
	actionUnchanged  = "unchanged"
)

// ErrApplyRefused: the server refused an object in the validation pass;
// nothing was changed.
var ErrApplyRefused = errors.New("the server refused the manifests; nothing was changed")

// defaultRollbackWindow is the window the coordinator gives a rollback
// policy that names none (api.DefaultRollbackWindow).
const defaultRollbackWindow = 5 * time.Minute

// write is one request of a change.
type write struct {
	do func(ctx context.Context, cl *client.Client) error
	// afterCreate: the write needs the object's own create first (a new
	// Namespace's quota), so a dry run cannot check it alone.
	afterCreate bool
	// labels: the write sets only the object's labels, which no revision
	// freezes (--deploy does not deploy for it).
	labels bool
}

// change is what apply does to one object: its action, the normal forms
// diff compares (current nil when absent) and the writes that make it so.
type change struct {
	obj              *object
	action           string
	current, desired any
	writes           []write
	// needs names an object this apply creates that the writes need, so
	// the server can check them only once it exists ("" when none).
	needs string
}

// planner plans the changes of a set of objects against the coordinator.
type planner struct {
	cl *client.Client
	// created holds the refs of the objects this apply creates.
	created  map[string]bool
	bindings []wire.RoleBinding
	listed   bool
}

// plan compares every object with what the coordinator holds.
func (p *planner) plan(ctx context.Context, objs []*object) ([]*change, error) {
	p.created = map[string]bool{}
	var out []*change
	for _, o := range objs {
		var c *change
		var err error
		switch s := o.spec.(type) {
		case *namespaceSpec:
			c, err = p.namespace(ctx, o, s)
		case *credentialSpec:
			c, err = p.credential(ctx, o, s)
		case *configurationSpec:
			c, err = p.configuration(ctx, o, s)
		case *agentSpec:
			c, err = p.agent(ctx, o, s)
		case *roleBindingSpec:
			c, err = p.roleBinding(ctx, o, s)
		}
		if err != nil {
			var me *ManifestError
			if errors.As(err, &me) {
				return nil, err
			}
			return nil, fmt.Errorf("%s (%s document %d): %w", o.ref(), o.file, o.doc, err)
		}
		if c.action == actionCreated {
			p.created[o.ref()] = true
		}
		if c.needs == "" && o.kind != KindNamespace && p.created["namespace/"+o.namespace] {
			c.needs = "namespace/" + o.namespace
		}
		out = append(out, c)
	}
	return out, nil
}

// settle sets c's action from its forms: created without a current one,
// configured when they differ.
func settle(c *change) *change {
	switch {
	case c.current == nil:
		c.action = actionCreated
	case !sameJSON(c.current, c.desired):
		c.action = actionConfigured
	default:
		c.action, c.writes = actionUnchanged, nil
	}
	return c
}

// sameJSON compares two values by their JSON encodings, decoded (so key
// order and number spelling do not count).
func sameJSON(x, y any) bool {
	return reflect.DeepEqual(jsonValue(x), jsonValue(y))
}

func jsonValue(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

type namespaceForm struct {
	Name   string               `json:"name"`
	Labels map[string]string    `json:"labels,omitempty"`
	Quota  *wire.NamespaceQuota `json:"quota,omitempty"`
}

// normLabels is a label set as compared: none is nil.
func normLabels(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// sendLabels is what apply sends as an object's labels: always a map, so
// an empty one clears them.
func sendLabels(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// labelsWrite appends to c the write that makes o's labels the manifest's
// when the current ones differ.
func labelsWrite(c *change, o *object, current map[string]string, set func(ctx context.Context, cl *client.Client, labels map[string]string) error) {
	if sameJSON(normLabels(current), o.labels) {
		return
	}
	c.writes = append(c.writes, write{labels: true, do: func(ctx context.Context, cl *client.Client) error {
		return set(ctx, cl, sendLabels(o.labels))
	}})
}

// inputsChanged reports whether c writes more than labels.
func (c *change) inputsChanged() bool {
	for _, w := range c.writes {
		if !w.labels {
			return true
		}
	}
	return false
}

func quotaOrNil(q *wire.NamespaceQuota) *wire.NamespaceQuota {
	if q == nil || *q == (wire.NamespaceQuota{}) {
		return nil
	}
	return q
}

func (p *planner) namespace(ctx context.Context, o *object, s *namespaceSpec) (*change, error) {
	want := namespaceForm{Name: o.name, Labels: o.labels, Quota: quotaOrNil(s.Quota)}
	c := &change{obj: o, desired: want}
	cur, err := p.cl.Namespace(ctx, o.name)
	switch {
	case isNotFound(err):
		c.writes = append(c.writes, write{do: func(ctx context.Context, cl *client.Client) error {
			_, err := cl.CreateNamespaceWith(ctx, wire.CreateNamespace{Name: o.name, Labels: o.labels})
			return err
		}})
	case err != nil:
		return nil, err
	default:
		cf := namespaceForm{Name: cur.Name, Labels: normLabels(cur.Labels)}
		if s.Quota != nil {
			cf.Quota = quotaOrNil(cur.Quota)
		} else {
			want.Quota = cf.Quota // the quota is not the manifest's
			c.desired = want
		}
		c.current = cf
		labelsWrite(c, o, cur.Labels, func(ctx context.Context, cl *client.Client, labels map[string]string) error {
			_, err := cl.SetNamespaceLabels(ctx, o.name, labels)
			return err
		})
	}
	// A managed quota is set on an existing Namespace when it differs, and
	// on a new one unless it is empty.
	if s.Quota != nil && (c.current != nil && !sameJSON(c.current.(namespaceForm).Quota, want.Quota) ||
		c.current == nil && quotaOrNil(s.Quota) != nil) {
		c.writes = append(c.writes, write{afterCreate: c.current == nil, do: func(ctx context.Context, cl *client.Client) error {
			_, err := cl.SetNamespaceQuota(ctx, o.name, *s.Quota)
			return err
		}})
	}
	return settle(c), nil
}

type credentialForm struct {
	Name string `json:"name"`
	From string `json:"from,omitempty"`
}

func (p *planner) credential(ctx context.Context, o *object, s *credentialSpec) (*change, error) {
	c := &change{obj: o, desired: credentialForm{Name: o.name, From: s.From}}
	cur, err := p.cl.CredentialSource(ctx, o.namespace, o.name)
	switch {
	case isNotFound(err):
		if s.From == "" {
			return nil, o.errorf(CodeManifestUnsupported, "the credential source does not exist, and a manifest holds no values: "+
				"create it with `occ -n %s credential create %s` (or register it here with spec.from)", o.namespace, o.name)
		}
		c.writes = append(c.writes, write{do: func(ctx context.Context, cl *client.Client) error {
			_, err := cl.CreateCredentialSource(ctx, o.namespace, wire.CreateCredentialSource{Name: o.name, From: s.From})
			return err
		}})
	case err != nil:
		return nil, err
	default:
		c.current = credentialForm{Name: cur.Name, From: cur.RegisteredFrom}
		if s.From == "" {
			// The manifest asks only that the source exists.
			c.desired = c.current
		}
		c.writes = append(c.writes, write{do: func(ctx context.Context, cl *client.Client) error {
			_, err := cl.RotateCredentialSource(ctx, o.namespace, o.name, wire.RotateCredentialSource{From: s.From})
			return err
		}})
	}
	return settle(c), nil
}

type configurationForm struct {
	Name     string            `json:"name"`
	Labels   map[string]string `json:"labels,omitempty"`
	Document any               `json:"document"`
}

func (p *planner) configuration(ctx context.Context, o *object, s *configurationSpec) (*change, error) {
	var doc any
	if err := json.Unmarshal(s.Document, &doc); err != nil {
		return nil, o.errorf(CodeManifestField, "spec.document: %v", err)
	}
	c := &change{obj: o, desired: configurationForm{Name: o.name, Labels: o.labels, Document: doc}}
	cur, err := p.cl.Configuration(ctx, o.namespace, o.name)
	switch {
	case isNotFound(err):
		c.writes = append(c.writes, write{do: func(ctx context.Context, cl *client.Client) error {
			_, err := cl.CreateConfigurationWith(ctx, o.namespace, wire.CreateConfiguration{Name: o.name, Document: s.Document,
				Labels: o.labels})
			return err
		}})
	case err != nil:
		return nil, err
	default:
		var curDoc any
		_ = json.Unmarshal(cur.Document, &curDoc)
		c.current = configurationForm{Name: cur.Name, Labels: normLabels(cur.Labels), Document: curDoc}
		// Only a changed document is written: each write is a new
		// generation, which the Agents' next deploys pick up.
		if !sameJSON(curDoc, doc) {
			c.writes = append(c.writes, write{do: func(ctx context.Context, cl *client.Client) error {
				_, err := cl.UpdateConfiguration(ctx, o.namespace, o.name, s.Document)
				return err
			}})
		}
		labelsWrite(c, o, cur.Labels, func(ctx context.Context, cl *client.Client, labels map[string]string) error {
			_, err := cl.SetConfigurationLabels(ctx, o.namespace, o.name, labels)
			return err
		})
	}
	return settle(c), nil
}

// agentForm is an Agent's inputs as a manifest states them, defaults
// filled in.
type agentForm struct {
	Configuration    string               `json:"configuration"`
	ExecutionMode    string               `json:"executionMode"`
	HarnessAuth      *wire.HarnessAuth    `json:"harnessAuth,omitempty"`
	ComputeID        string               `json:"computeId,omitempty"`
	Plugins          []string             `json:"plugins,omitempty"`
	Rollback         *wire.RollbackPolicy `json:"rollback,omitempty"`
	ServicePrincipal string               `json:"servicePrincipal"`
	Resources        *wire.AgentResources `json:"resources,omitempty"`
	Labels           map[string]string    `json:"labels,omitempty"`
}

// normRollback is a policy as the coordinator reports it: none unless
// enabled, its window a Go duration.
func normRollback(r *wire.RollbackPolicy) *wire.RollbackPolicy {
	if r == nil || !r.Enabled {
		return nil
	}
	w := defaultRollbackWindow
	if r.Window != "" {
		d, err := time.ParseDuration(r.Window)
		if err != nil {
			return &wire.RollbackPolicy{Enabled: true, Window: r.Window} // the server refuses it
		}
		w = d
	}
	return &wire.RollbackPolicy{Enabled: true, Window: w.String()}
}

func normResources(r *wire.AgentResources) *wire.AgentResources {
	if r == nil || *r == (wire.AgentResources{}) {
		return nil
	}
	return r
}

func normPlugins(p []string) []string {
	if len(p) == 0 {
		return nil
	}
	return p
}

func (p *planner) agent(ctx context.Context, o *object, s *agentSpec) (*change, error) {
	want := agentForm{Configuration: s.Configuration, ExecutionMode: s.ExecutionMode, HarnessAuth: s.HarnessAuth,
		ComputeID: s.ComputeID, Plugins: normPlugins(s.Plugins), Rollback: normRollback(s.Rollback),
		ServicePrincipal: s.ServicePrincipal, Resources: normResources(s.Resources), Labels: o.labels}
	if want.ExecutionMode == "" {
		want.ExecutionMode = wire.ModeEmbedded
	}
	if want.ServicePrincipal == "" {
		want.ServicePrincipal = o.name
	}
	c := &change{obj: o}
	if cfg := "config/" + o.namespace + "/" + s.Configuration; p.created[cfg] {
		c.needs = cfg
	}
	cur, err := p.cl.Agent(ctx, o.namespace, o.name)
	switch {
	case isNotFound(err):
		c.desired = want
		c.writes = append(c.writes, write{do: func(ctx context.Context, cl *client.Client) error {
			_, err := cl.CreateAgent(ctx, o.namespace, wire.CreateAgent{Name: o.name, Configuration: s.Configuration,
				ExecutionMode: s.ExecutionMode, HarnessAuth: s.HarnessAuth, ComputeID: s.ComputeID, Plugins: s.Plugins,
				Rollback: s.Rollback, ServicePrincipal: s.ServicePrincipal, Resources: s.Resources, Labels: o.labels})
			return err
		}})
		return settle(c), nil
	case err != nil:
		return nil, err
	}
	// The Agent names its Configuration by id; the manifest by name (or id).
	cfgName := cur.ConfigurationID
	if cf, err := p.cl.Configuration(ctx, o.namespace, cur.ConfigurationID); err == nil {
		cfgName = cf.Name
	}
	if want.Configuration == cur.ConfigurationID {
		want.Configuration = cfgName
	}
	have := agentForm{Configuration: cfgName, ExecutionMode: cur.ExecutionMode, HarnessAuth: cur.HarnessAuth,
		ComputeID: cur.ComputeID, Plugins: normPlugins(cur.Plugins), Rollback: normRollback(cur.Rollback),
		ServicePrincipal: cur.ServicePrincipal, Resources: normResources(cur.Resources), Labels: normLabels(cur.Labels)}
	c.current, c.desired = have, want
	if have.ServicePrincipal != want.ServicePrincipal {
		return nil, o.errorf(CodeManifestUnsupported, "spec.servicePrincipal is %q, the Agent's is %q: an Agent's service principal never changes (recreate the Agent)",
			want.ServicePrincipal, have.ServicePrincipal)
	}
	if have.HarnessAuth != nil && want.HarnessAuth == nil {
		return nil, o.errorf(CodeManifestUnsupported, "spec.harnessAuth is absent, the Agent has one: an update cannot remove it (set method runtime, or recreate the Agent)")
	}
	// The update names only what differs: the rest keeps its value.
	var req wire.UpdateAgent
	if have.Configuration != want.Configuration {
		req.Configuration = &s.Configuration
	}
	if have.ExecutionMode != want.ExecutionMode {
		req.ExecutionMode = &want.ExecutionMode
	}
	if !sameJSON(have.HarnessAuth, want.HarnessAuth) {
		req.HarnessAuth = want.HarnessAuth
	}
	if have.ComputeID != want.ComputeID {
		req.ComputeID = &want.ComputeID
	}
	if !sameJSON(have.Plugins, want.Plugins) {
		plugins := append([]string{}, want.Plugins...) // [] clears; null would keep
		req.Plugins = &plugins
	}
	if !sameJSON(have.Rollback, want.Rollback) {
		req.Rollback = &wire.RollbackPolicy{}
		if want.Rollback != nil {
			req.Rollback = s.Rollback
		}
	}
	if !sameJSON(have.Resources, want.Resources) {
		req.Resources = &wire.AgentResources{} // an empty object restores the defaults
		if want.Resources != nil {
			req.Resources = want.Resources
		}
	}
	if !sameJSON(req, wire.UpdateAgent{}) {
		c.writes = append(c.writes, write{do: func(ctx context.Context, cl *client.Client) error {
			_, err := cl.UpdateAgent(ctx, o.namespace, o.name, req)
			return err
		}})
	}
	labelsWrite(c, o, cur.Labels, func(ctx context.Context, cl *client.Client, labels map[string]string) error {
		_, err := cl.SetAgentLabels(ctx, o.namespace, o.name, labels)
		return err
	})
	return settle(c), nil
}

type roleBindingForm struct {
	Role      string            `json:"role"`
	Namespace string            `json:"namespace,omitempty"`
	Subject   wire.Subject      `json:"subject"`
	Labels    map[string]string `json:"labels,omitempty"`
}

// grants reports whether b grants what f does (labels aside): the same
// binding.
func (f roleBindingForm) grants(b wire.RoleBinding) bool {
	return f.Role == b.Role && f.Namespace == b.Namespace && f.Subject == b.Subject
}

func (p *planner) roleBinding(ctx context.Context, o *object, s *roleBindingSpec) (*change, error) {
	if !p.listed {
		bs, err := p.cl.RoleBindings(ctx)
		if err != nil {
			return nil, err
		}
		p.bindings, p.listed = bs, true
	}
	want := roleBindingForm{Role: s.Role, Namespace: o.namespace, Subject: s.Subject, Labels: o.labels}
	c := &change{obj: o, desired: want}
	for _, b := range p.bindings {
		if want.grants(b) {
			have := want
			have.Labels = normLabels(b.Labels)
			c.current = have
			labelsWrite(c, o, b.Labels, func(ctx context.Context, cl *client.Client, labels map[string]string) error {
				_, err := cl.SetRoleBindingLabels(ctx, b.ID, labels)
				return err
			})
		}
	}
	if c.current == nil {
		c.writes = append(c.writes, write{do: func(ctx context.Context, cl *client.Client) error {
			_, err := cl.CreateRoleBinding(ctx, wire.CreateRoleBinding{Role: s.Role, Namespace: o.namespace, Subject: s.Subject,
				Labels: o.labels})
			return err
		}})
		if s.Subject.Kind == wire.PrincipalServicePrincipal {
			// An Agent's own service principal comes with the Agent.
			sp := strings.TrimPrefix(s.Subject.Name, o.namespace+"/")
			if ref := "agent/" + o.namespace + "/" + sp; p.created[ref] {
				c.needs = ref
			}
		}
	}
	return settle(c), nil
}

// loadPlan reads the manifests of -f and plans their changes.
func (a *app) loadPlan(ctx context.Context, files []string, recursive bool) ([]*change, error) {
	if len(files) == 0 {
		return nil, usageError(errors.New("name the manifests: -f FILE|DIR (repeatable; '-' for stdin)"))
	}
	paths, err := manifestFiles(files, recursive)
	if err != nil {
		return nil, err
	}
	objs, err := a.readManifests(paths, a.settings.Namespace)
	if err != nil {
		return nil, err
	}
	if len(objs) == 0 {
		return nil, &ManifestError{Code: CodeManifestMissing, File: strings.Join(files, ", "), Err: errors.New("no documents")}
	}
	p := &planner{cl: a.client()}
	return p.plan(ctx, objs)
}

// manifestExit makes a manifest error exit 2 (usage): bad input.
func manifestExit(err error) error {
	var me *ManifestError
	if errors.As(err, &me) && me.Code != CodeManifestUnsupported {
		return usageError(err)
	}
	return err
}

// validate dry-runs every write the server can check now; it returns the
// refusals, one per object.
func validate(ctx context.Context, cl *client.Client, changes []*change) []error {
	dry := client.WithDryRun(ctx)
	var errs []error
	for _, c := range changes {
		if c.needs != "" {
			continue
		}
		for _, w := range c.writes {
			if w.afterCreate {
				continue
			}
			if err := w.do(dry, cl); err != nil {
				errs = append(errs, fmt.Errorf("%s (%s document %d): %w", c.obj.ref(), c.obj.file, c.obj.doc, err))
				break
			}
		}
	}
	return errs
}

func (a *app) applyCmd() *cobra.Command {
	var files []string
	var recursive bool
	var dryRun string
	var deploy, wait bool
	var timeout time.Duration
	var prune, pruneNamespaces bool
	var selector string
	c := &cobra.Command{
		Use:   "apply -f FILE|DIR [--dry-run=server] [--prune -l KEY=VALUE[,…] [--prune-namespaces]]",
		Short: "Make the coordinator hold what manifests state: Namespaces, credential sources, Configurations, Agents, role bindings",
		Long: `apply reads YAML (or JSON) manifests — documents of apiVersion oce.dev/v1, kind Namespace, Credential,
Configuration, Agent or RoleBinding, several to a file separated by ---, from files or directories — and makes
the coordinator hold them. It decodes every document strictly first (an unknown kind or field, bad YAML, a missing
name: exit 2 naming the file, the document and the line, nothing applied); then the server checks every create and
update as a dry run (validation, authorization, admission, quota; a refusal: exit 1, nothing applied); then apply
writes them in dependency order — Namespaces, credential sources, Configurations, Agents, role bindings — printing
one line per object: created, configured (updated) or unchanged. An object equal to the coordinator's is not
written, so applying the same manifests again prints only unchanged and changes nothing. metadata.labels are part
of the object (a label change is a change; an Agent or Configuration whose labels alone changed is not deployed).

apply deletes nothing unless asked: objects missing from the manifests are left alone. With --prune -l KEY=VALUE[,…]
it then deletes the Agents, Configurations and role bindings that carry every selected label, in the Namespaces
the manifests name, and that the manifests no longer state — role bindings, then Agents (waiting up to --timeout
until they are gone), then Configurations — printing "agent/NS/NAME pruned". A Configuration still used by an
Agent prune does not delete is kept and reported (exit 1). --prune-namespaces also deletes the labelled Namespaces
the manifests no longer name (their labelled objects first); one that still holds anything else is kept and
reported. --prune without -l is refused (exit 2): a prune with no label set would own everything. With
--dry-run=server prune deletes nothing and prints "… pruned (dry run)". It deploys only with --deploy: then every Agent of the
manifests that it created or configured, or whose Configuration it configured, is deployed (checked by the
server when deployed: its inputs are the ones just written), printing "agent/NS/NAME deployed (revision N)";
--wait follows each revision as occ agent deploy --wait does (exit 3 when one fails).

An object that names one this apply creates (anything in a new Namespace, an Agent of a new Configuration) can
be checked by the server only once that exists: it is checked when written, and a refusal then stops apply
after what came before it (apply again once fixed). Credential values are never in manifests: a Credential
either registers a source from a location (spec.from, cluster administrators) or states that the source
exists (occ credential create makes it). The manifest format is in docs/OPERATIONS.md.`,
		Example: `  occ apply -f team-a/
  occ apply -f team-a/ --prune -l team=a
  occ apply -f team-a/ --deploy --wait
  occ apply -f agents.yaml --dry-run=server
  occ diff -f team-a/ || occ apply -f team-a/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dryRun != "" && dryRun != dryRunServer {
				return usageError(fmt.Errorf("--dry-run=%s: only server is supported", dryRun))
			}
			if wait && !deploy {
				return usageError(errors.New("--wait follows the deploys of --deploy: give both"))
			}
			switch {
			case prune:
				if err := pruneSelector(selector); err != nil {
					return usageError(err)
				}
			case selector != "":
				return usageError(errors.New("-l selects what --prune deletes: give --prune too"))
			case pruneNamespaces:
				return usageError(errors.New("--prune-namespaces widens --prune: give --prune -l too"))
			}
			if timeout <= 0 {
				return usageError(fmt.Errorf("--timeout %s: want a positive duration", timeout))
			}
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			changes, err := a.loadPlan(ctx, files, recursive)
			if err != nil {
				return manifestExit(err)
			}
			cl := a.client()
			stderr := cmd.ErrOrStderr()
			var pp *prunePlan
			if prune {
				if pp, err = planPrune(ctx, cl, changes, selector, pruneNamespaces); err != nil {
					return err
				}
			}
			if errs := validate(ctx, cl, changes); len(errs) > 0 {
				for _, e := range errs {
					fmt.Fprintln(stderr, "occ:", e)
				}
				return fmt.Errorf("%w (%d object(s) refused)", ErrApplyRefused, len(errs))
			}
			out := cmd.OutOrStdout()
			for _, c := range changes {
				if dryRun != "" {
					note := " (server dry run)"
					if c.needs != "" && c.action != actionUnchanged {
						note = " (server dry run; not checked: needs " + c.needs + ", which this apply creates)"
					}
					fmt.Fprintln(out, c.obj.ref(), c.action+note)
					continue
				}
				for _, w := range c.writes {
					if err := w.do(ctx, cl); err != nil {
						return fmt.Errorf("%s (%s document %d): %w; the objects before it were applied", c.obj.ref(), c.obj.file, c.obj.doc, err)
					}
				}
				fmt.Fprintln(out, c.obj.ref(), c.action)
			}
			if pp != nil {
				r := &pruneRun{a: a, cmd: cmd, cl: cl, changes: changes, plan: pp, dryRun: dryRun != "", timeout: timeout,
					out: out, errw: stderr, gone: map[string]bool{}}
				if err := r.run(cmd.Context()); err != nil {
					return err
				}
			}
			if !deploy {
				return nil
			}
			return a.deployApplied(cmd, cl, changes, dryRun != "", wait, timeout)
		},
	}
	f := c.Flags()
	f.StringArrayVarP(&files, "filename", "f", nil, "a manifest file, a directory of them, or '-' for stdin (repeatable)")
	f.BoolVarP(&recursive, "recursive", "R", false, "read the directories' subdirectories too")
	f.StringVar(&dryRun, "dry-run", "", "server: let the server check every change and print what apply would do, changing nothing")
	f.BoolVar(&deploy, "deploy", false, "then deploy every Agent of the manifests that apply created or configured, or whose Configuration it configured")
	f.BoolVar(&wait, "wait", false, "with --deploy: wait until each deployed revision is active or failed")
	f.DurationVar(&timeout, "timeout", DefaultWaitTimeout, "how long --wait waits for each revision, and --prune for the pruned Agents to be gone")
	f.BoolVar(&prune, "prune", false, "then delete the objects that carry every label of -l and that the manifests no longer state")
	f.StringVarP(&selector, "selector", "l", "", "with --prune: the labels of what the manifests own, KEY=VALUE[,…]")
	f.BoolVar(&pruneNamespaces, "prune-namespaces", false, "with --prune: delete the labelled Namespaces the manifests no longer name, too")
	return c
}

// renderForm is an object's normal form as diff shows it (YAML).
func renderForm(v any) string {
	if v == nil {
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	y, err := yaml.JSONToYAML(b)
	if err != nil {
		return string(b) + "\n"
	}
	return string(bytes.TrimRight(y, "\n")) + "\n"
}

// deployApplied deploys the Agents of changes that apply created or
// configured, or whose Configuration it configured: what the manifests
// changed reaches their runtimes. An unchanged set deploys nothing.
func (a *app) deployApplied(cmd *cobra.Command, cl *client.Client, changes []*change, dryRun, wait bool, timeout time.Duration) error {
	configured := map[string]bool{}
	for _, c := range changes {
		if c.obj.kind == KindConfiguration && c.inputsChanged() {
			configured[c.obj.namespace+"/"+c.obj.name] = true
		}
	}
	out := cmd.OutOrStdout()
	for _, c := range changes {
		s, ok := c.obj.spec.(*agentSpec)
		// A change of labels alone is no input of a revision.
		if !ok || !c.inputsChanged() && !configured[c.obj.namespace+"/"+s.Configuration] {
			continue
		}
		if dryRun {
			fmt.Fprintln(out, c.obj.ref(), "deployed (server dry run; not checked: admitted from the inputs above)")
			continue
		}
		ctx, cancel := a.ctx(cmd)
		res, err := cl.Deploy(ctx, c.obj.namespace, c.obj.name, wire.Deploy{})
		cancel()
		if err != nil {
			return fmt.Errorf("%s: deploy: %w", c.obj.ref(), err)
		}
		fmt.Fprintf(out, "%s deployed (revision %d)\n", c.obj.ref(), res.Number)
		if !wait {
			continue
		}
		wctx, wcancel := context.WithTimeout(cmd.Context(), timeout)
		ns := a.settings.Namespace
		a.settings.Namespace = c.obj.namespace // waitActive follows the Agent of the settings' namespace
		_, err = a.waitActive(wctx, cmd, cl, c.obj.name, res)
		a.settings.Namespace = ns
		wcancel()
		if err != nil {
			return fmt.Errorf("%s: %w", c.obj.ref(), err)
		}
	}
	return nil
}
