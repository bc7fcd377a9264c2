package occ

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
)

// occ apply --prune -l SELECTOR: after applying, delete the objects a
// manifest set owns — those of the managed kinds that carry every selected
// label, in the Namespaces the manifests name, and that no manifest states
// any more. Each deletion is the API's normal (audited) one, in the order
// role bindings, Agents (waiting until they are gone), Configurations,
// Namespaces (only with --prune-namespaces).

// ErrPruneIncomplete: prune kept objects it was asked to delete (a
// Configuration an Agent outside the prune still uses); the rest was done.
var ErrPruneIncomplete = errors.New("prune kept objects it could not delete")

// pruneItem is one object prune deletes.
type pruneItem struct {
	kind, namespace, name string
	id                    string // a role binding's id
	deleting              bool   // an Agent already being deleted
}

func (it pruneItem) ref() string {
	k := map[string]string{KindNamespace: "namespace", KindConfiguration: "config", KindAgent: "agent",
		KindRoleBinding: "rolebinding"}[it.kind]
	if it.namespace == "" {
		return k + "/" + it.name
	}
	return k + "/" + it.namespace + "/" + it.name
}

// prunePlan is what prune deletes, by kind in deletion order.
type prunePlan struct {
	bindings, agents, configs, namespaces []pruneItem
	// scope are the Namespaces prune looks in.
	scope []string
}

// pruneSelector checks -l locally: terms key=value, key!=value or key,
// comma-separated; the server checks the syntax of keys and values.
func pruneSelector(sel string) error {
	if strings.TrimSpace(sel) == "" {
		return errors.New("--prune needs -l KEY=VALUE[,…]: a prune with no label set would own every object")
	}
	for _, term := range strings.Split(sel, ",") {
		k, _, _ := strings.Cut(strings.Replace(term, "!=", "=", 1), "=")
		if strings.TrimSpace(k) == "" {
			return fmt.Errorf("-l %q: the term %q names no label key", sel, term)
		}
	}
	return nil
}

// bindingName names a role binding as prune prints it: what it grants.
func bindingName(role string, s wire.Subject) string {
	return role + ":" + s.Kind + ":" + s.Name
}

// planPrune lists what the selector owns and the manifests do not state.
// It reads only, so a malformed selector refuses the run before apply
// writes anything.
func planPrune(ctx context.Context, cl *client.Client, changes []*change, sel string, withNamespaces bool) (*prunePlan, error) {
	stated := map[string]bool{}
	named := map[string]bool{} // the Namespaces the manifests name
	for _, c := range changes {
		o := c.obj
		switch s := o.spec.(type) {
		case *roleBindingSpec:
			stated[KindRoleBinding+"/"+o.namespace+"/"+bindingName(s.Role, s.Subject)] = true
		default:
			stated[o.kind+"/"+o.namespace+"/"+o.name] = true
		}
		if o.kind == KindNamespace {
			named[o.name] = true
		} else if o.namespace != "" {
			named[o.namespace] = true
		}
	}
	p := &prunePlan{}
	// Listing the Namespaces first checks the selector.
	nss, err := cl.NamespacesSelected(ctx, sel)
	if err != nil {
		return nil, fmt.Errorf("-l %s: %w", sel, err)
	}
	scope := map[string]bool{}
	for ns := range named {
		scope[ns] = true
	}
	if withNamespaces {
		for _, ns := range nss {
			if !named[ns.Name] {
				p.namespaces = append(p.namespaces, pruneItem{kind: KindNamespace, name: ns.Name})
				scope[ns.Name] = true // its owned objects go first
			}
		}
	}
	for ns := range scope {
		p.scope = append(p.scope, ns)
	}
	slices.Sort(p.scope)
	for _, ns := range p.scope {
		agents, err := cl.AgentsSelected(ctx, ns, sel)
		if isNotFound(err) {
			continue // created by this apply: it holds nothing yet
		}
		if err != nil {
			return nil, err
		}
		for _, a := range agents {
			if !stated[KindAgent+"/"+ns+"/"+a.Name] {
				p.agents = append(p.agents, pruneItem{kind: KindAgent, namespace: ns, name: a.Name, deleting: a.Deleting})
			}
		}
		cfgs, err := cl.ConfigurationsSelected(ctx, ns, sel)
		if err != nil {
			return nil, err
		}
		for _, cf := range cfgs {
			if !stated[KindConfiguration+"/"+ns+"/"+cf.Name] {
				p.configs = append(p.configs, pruneItem{kind: KindConfiguration, namespace: ns, name: cf.Name, id: cf.ID})
			}
		}
	}
	bindings, err := cl.RoleBindingsSelected(ctx, sel)
	if err != nil {
		return nil, err
	}
	for _, b := range bindings {
		// Cluster-wide bindings (no Namespace) are never pruned.
		if b.Namespace == "" || !scope[b.Namespace] {
			continue
		}
		name := bindingName(b.Role, b.Subject)
		if !stated[KindRoleBinding+"/"+b.Namespace+"/"+name] {
			p.bindings = append(p.bindings, pruneItem{kind: KindRoleBinding, namespace: b.Namespace, name: name, id: b.ID})
		}
	}
	return p, nil
}

// pruneRun carries out a plan, printing one line per object.
type pruneRun struct {
	a       *app
	cmd     *cobra.Command
	cl      *client.Client
	changes []*change
	plan    *prunePlan
	dryRun  bool
	timeout time.Duration
	out     io.Writer
	errw    io.Writer
	kept    int
	// gone holds the refs of the Configurations pruned (or, in a dry run,
	// that would be).
	gone map[string]bool
}

func (r *pruneRun) done(it pruneItem) {
	if r.dryRun {
		fmt.Fprintln(r.out, it.ref(), "pruned (dry run)")
		return
	}
	fmt.Fprintln(r.out, it.ref(), "pruned")
}

func (r *pruneRun) keep(it pruneItem, why string) {
	r.kept++
	fmt.Fprintf(r.errw, "occ: %s kept: %s\n", it.ref(), why)
}

// run deletes the plan's objects in order; it stops at the first error
// the server answers (what came before stays done).
func (r *pruneRun) run(ctx context.Context) error {
	for _, it := range r.plan.bindings {
		if !r.dryRun {
			if _, err := r.cl.DeleteRoleBinding(ctx, it.id); err != nil && !isNotFound(err) {
				return fmt.Errorf("prune %s: %w", it.ref(), err)
			}
		}
		r.done(it)
	}
	for _, it := range r.plan.agents {
		if !r.dryRun && !it.deleting {
			if _, err := r.cl.DeleteAgent(ctx, it.namespace, it.name); err != nil && !isNotFound(err) {
				return fmt.Errorf("prune %s: %w", it.ref(), err)
			}
		}
	}
	if !r.dryRun && len(r.plan.agents) > 0 {
		// A Configuration or Namespace can go only once its Agents have.
		if err := r.awaitAgentsGone(ctx); err != nil {
			return err
		}
	}
	for _, it := range r.plan.agents {
		r.done(it)
	}
	for _, it := range r.plan.configs {
		users, err := r.users(ctx, it)
		if err != nil {
			return err
		}
		if len(users) > 0 {
			r.keep(it, "still used by agent(s) "+strings.Join(users, ", ")+" that prune does not delete")
			continue
		}
		if !r.dryRun {
			if _, err := r.cl.DeleteConfiguration(ctx, it.namespace, it.name); err != nil && !isNotFound(err) {
				return fmt.Errorf("prune %s: %w", it.ref(), err)
			}
		}
		r.gone[it.ref()] = true
		r.done(it)
	}
	for _, it := range r.plan.namespaces {
		held, err := r.holds(ctx, it.name)
		if err != nil {
			return err
		}
		if len(held) > 0 {
			// Not an error: what the Namespace holds is not this set's.
			fmt.Fprintf(r.errw, "occ: %s kept: it still holds %s that prune does not delete\n", it.ref(), strings.Join(held, ", "))
			continue
		}
		if !r.dryRun {
			if _, err := r.cl.DeleteNamespace(ctx, it.name); err != nil && !isNotFound(err) {
				var ae *client.Error
				if errors.As(err, &ae) && ae.Status == 409 {
					fmt.Fprintf(r.errw, "occ: %s kept: %v\n", it.ref(), err)
					continue
				}
				return fmt.Errorf("prune %s: %w", it.ref(), err)
			}
		}
		r.done(it)
	}
	if r.kept > 0 {
		return fmt.Errorf("%w (%d kept)", ErrPruneIncomplete, r.kept)
	}
	return nil
}

// pruned reports whether prune deletes the Agent ns/name.
func (r *pruneRun) pruned(ns, name string) bool {
	return slices.ContainsFunc(r.plan.agents, func(it pruneItem) bool { return it.namespace == ns && it.name == name })
}

// users lists the Agents outside the prune that use the Configuration it:
// after the apply (a dry run: as the manifests state them).
func (r *pruneRun) users(ctx context.Context, it pruneItem) ([]string, error) {
	agents, err := r.cl.Agents(ctx, it.namespace)
	if err != nil && !isNotFound(err) {
		return nil, err
	}
	stated := map[string]string{} // the manifests' Agents of the Namespace: their Configuration
	for _, c := range r.changes {
		if s, ok := c.obj.spec.(*agentSpec); ok && c.obj.namespace == it.namespace {
			stated[c.obj.name] = s.Configuration
		}
	}
	uses := func(ref string) bool { return ref == it.name || ref == it.id }
	var out []string
	seen := map[string]bool{}
	for _, a := range agents {
		seen[a.Name] = true
		if r.pruned(it.namespace, a.Name) {
			continue
		}
		cfg, ok := stated[a.Name]
		if !r.dryRun || !ok {
			cfg = a.ConfigurationID
		}
		if uses(cfg) || !r.dryRun && uses(a.Configuration) {
			out = append(out, a.Name)
		}
	}
	if r.dryRun { // Agents this apply would create
		for name, cfg := range stated {
			if !seen[name] && uses(cfg) {
				out = append(out, name)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// holds lists what a Namespace prune would delete still holds besides what
// prune deleted (a dry run: would delete).
func (r *pruneRun) holds(ctx context.Context, ns string) ([]string, error) {
	var out []string
	agents, err := r.cl.Agents(ctx, ns)
	if err != nil {
		return nil, err
	}
	for _, a := range agents {
		if !r.dryRun || !r.pruned(ns, a.Name) {
			out = append(out, "agent "+a.Name)
		}
	}
	cfgs, err := r.cl.Configurations(ctx, ns)
	if err != nil {
		return nil, err
	}
	for _, cf := range cfgs {
		if !r.gone[pruneItem{kind: KindConfiguration, namespace: ns, name: cf.Name}.ref()] {
			out = append(out, "configuration "+cf.Name)
		}
	}
	creds, err := r.cl.CredentialSources(ctx, ns)
	if err != nil {
		return nil, err
	}
	for _, c := range creds {
		out = append(out, "credential source "+c.Name)
	}
	return out, nil
}

// awaitAgentsGone waits until every pruned Agent is removed (the engine
// completes each deletion), up to the run's timeout.
func (r *pruneRun) awaitAgentsGone(ctx context.Context) error {
	wctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	var left []string
	check := func() (bool, error) {
		left = left[:0]
		for _, it := range r.plan.agents {
			_, err := r.cl.Agent(wctx, it.namespace, it.name)
			switch {
			case isNotFound(err):
			case err != nil:
				if ferr := fatalRead(err); ferr != nil {
					return false, ferr
				}
				left = append(left, it.ref())
			default:
				left = append(left, it.ref())
			}
		}
		return len(left) == 0, nil
	}
	err := r.a.untilDone(wctx, r.cl, check)
	if err != nil && wctx.Err() != nil && ctx.Err() == nil {
		return &ExitError{Code: ExitTimeout, Err: fmt.Errorf("prune: timed out after %s waiting for the deletion of %s; "+
			"it continues on the server: apply --prune again once they are gone", r.timeout, strings.Join(left, ", "))}
	}
	return err
}
