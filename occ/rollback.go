package occ

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
)

// Refusals of occ agent rollback; each message starts with its code.
var (
	// ErrNoRollbackTarget (ROLLBACK_NO_TARGET): no revision to go back
	// to — the Agent has no active revision and no --to, no earlier one
	// ever served, or --to names none (or the active one).
	ErrNoRollbackTarget = errors.New("ROLLBACK_NO_TARGET")
	// ErrSharedConfiguration (ROLLBACK_SHARED_CONFIGURATION): the
	// revision's Configuration changed since, and other Agents use it:
	// restoring it in place would change their next deploys too.
	ErrSharedConfiguration = errors.New("ROLLBACK_SHARED_CONFIGURATION")
	// ErrRollbackUnsupported (ROLLBACK_UNSUPPORTED): an input of the
	// revision cannot be restored by an update (a harness binding the
	// Agent has since gained, a Configuration that is gone).
	ErrRollbackUnsupported = errors.New("ROLLBACK_UNSUPPORTED")
)

// rollbackTarget picks the revision to return to: number to when given,
// else the newest revision before the active one that served (retired or
// stopped).
func rollbackTarget(ag wire.Agent, revs []wire.Revision, to int64) (wire.Revision, error) {
	var active *wire.Revision
	for i := range revs {
		if revs[i].ID == ag.ActiveRevisionID {
			active = &revs[i]
		}
	}
	if to > 0 {
		for _, r := range revs {
			if r.Number != to {
				continue
			}
			if active != nil && r.ID == active.ID {
				return r, fmt.Errorf("%w: revision %d is the active one", ErrNoRollbackTarget, to)
			}
			return r, nil
		}
		return wire.Revision{}, fmt.Errorf("%w: agent %s has no revision %d", ErrNoRollbackTarget, ag.Name, to)
	}
	if active == nil {
		return wire.Revision{}, fmt.Errorf("%w: agent %s has no active revision: name one with --to N", ErrNoRollbackTarget, ag.Name)
	}
	var best *wire.Revision
	for i, r := range revs {
		served := r.Status == wire.RevisionRetired || r.Status == wire.RevisionStopped
		if served && r.Number < active.Number && (best == nil || r.Number > best.Number) {
			best = &revs[i]
		}
	}
	if best == nil {
		return wire.Revision{}, fmt.Errorf("%w: no revision before %d served: name one with --to N", ErrNoRollbackTarget, active.Number)
	}
	return *best, nil
}

// logLevelOf is the platform log level an admitted document was stamped
// with, so the rollback's admission stamps the same one.
func logLevelOf(doc json.RawMessage) string {
	var d struct {
		Logging struct {
			Level string `json:"level"`
		} `json:"logging"`
	}
	_ = json.Unmarshal(doc, &d)
	return d.Logging.Level
}

// rollbackStep is one write of a rollback and how it is reported.
type rollbackStep struct {
	what string
	do   func(ctx context.Context, cl *client.Client) error
}

// planRollback finds the writes that give the Agent revision target's
// inputs: its Configuration's document (in place, or as configCopy), then
// the Agent's fields.
func (a *app) planRollback(ctx context.Context, cl *client.Client, ag wire.Agent, target wire.Revision, configCopy string) ([]rollbackStep, error) {
	ns := a.settings.Namespace
	var steps []rollbackStep
	cfgRef := target.ConfigurationID // what the Agent must name
	if configCopy != "" {
		cur, err := cl.Configuration(ctx, ns, configCopy)
		switch {
		case isNotFound(err):
			steps = append(steps, rollbackStep{what: "config/" + configCopy + " created (revision " + itoa(target.Number) + "'s document)",
				do: func(ctx context.Context, cl *client.Client) error {
					_, err := cl.CreateConfiguration(ctx, ns, configCopy, target.Document)
					return err
				}})
		case err != nil:
			return nil, err
		case !sameDocument(cur.Document, target.Document):
			return nil, fmt.Errorf("%w: configuration %s exists with another document: name a new one", ErrRollbackUnsupported, configCopy)
		}
		cfgRef = configCopy
	} else {
		cur, err := cl.Configuration(ctx, ns, target.ConfigurationID)
		switch {
		case isNotFound(err):
			return nil, fmt.Errorf("%w: the configuration of revision %d is gone: restore its document as a new one with --config-copy NAME",
				ErrRollbackUnsupported, target.Number)
		case err != nil:
			return nil, err
		}
		cfgRef = cur.Name
		if cur.Generation != target.ConfigurationGeneration && !sameDocument(cur.Document, target.Document) {
			agents, err := cl.Agents(ctx, ns)
			if err != nil {
				return nil, err
			}
			var others []string
			for _, o := range agents {
				if o.ID != ag.ID && o.ConfigurationID == cur.ID {
					others = append(others, o.Name)
				}
			}
			if len(others) > 0 {
				return nil, fmt.Errorf("%w: configuration %s changed since revision %d (generation %d, now %d) and agents %v use it too: "+
					"restore its document for %s alone with --config-copy NAME", ErrSharedConfiguration, cur.Name, target.Number,
					target.ConfigurationGeneration, cur.Generation, others, ag.Name)
			}
			steps = append(steps, rollbackStep{what: fmt.Sprintf("config/%s configured (revision %d's document, generation %d)",
				cur.Name, target.Number, target.ConfigurationGeneration),
				do: func(ctx context.Context, cl *client.Client) error {
					_, err := cl.UpdateConfiguration(ctx, ns, cur.Name, target.Document)
					return err
				}})
		}
	}

	var req wire.UpdateAgent
	changed := false
	if configCopy != "" || ag.ConfigurationID != target.ConfigurationID {
		req.Configuration, changed = &cfgRef, true
	}
	if ag.ExecutionMode != target.Mode {
		mode := target.Mode
		req.ExecutionMode, changed = &mode, true
	}
	if ag.ComputeID != "" && ag.ComputeID != target.ComputeID {
		// An Agent that names none gets the driver's, as the revision did.
		id := target.ComputeID
		req.ComputeID, changed = &id, true
	}
	if !sameJSON(ag.HarnessAuth, target.HarnessAuth) {
		if target.HarnessAuth == nil {
			return nil, fmt.Errorf("%w: revision %d had no harness binding and an update cannot remove the Agent's", ErrRollbackUnsupported, target.Number)
		}
		req.HarnessAuth, changed = target.HarnessAuth, true
	}
	if !slices.Equal(normPlugins(ag.Plugins), normPlugins(target.Plugins)) {
		plugins := append([]string{}, target.Plugins...)
		req.Plugins, changed = &plugins, true
	}
	if !sameJSON(normResources(ag.Resources), normResources(target.Resources)) {
		res := &wire.AgentResources{}
		if target.Resources != nil {
			res = target.Resources
		}
		req.Resources, changed = res, true
	}
	if changed {
		steps = append(steps, rollbackStep{what: "agent/" + ag.Name + " configured (revision " + itoa(target.Number) + "'s inputs)",
			do: func(ctx context.Context, cl *client.Client) error {
				_, err := cl.UpdateAgent(ctx, ns, ag.Name, req)
				return err
			}})
	}
	return steps, nil
}

// sameDocument compares two documents as JSON values.
func sameDocument(x, y json.RawMessage) bool {
	var a, b any
	if json.Unmarshal(x, &a) != nil || json.Unmarshal(y, &b) != nil {
		return false
	}
	return sameJSON(a, b)
}

func (a *app) rollbackCmd() *cobra.Command {
	var to int64
	var wait bool
	var timeout time.Duration
	var configCopy string
	c := &cobra.Command{
		Use:   "rollback AGENT [--to N] [--wait]",
		Short: "Deploy an earlier revision's inputs again (an audited update and deploy)",
		Long: `rollback gives the Agent the inputs of an earlier revision and deploys them: revision N (--to N), or by default
the newest revision before the active one that served (retired or stopped). The steps are ordinary, audited
writes, printed as they are made: the revision's frozen document becomes its Configuration's again (a new
generation) when the Configuration changed since; the Agent's configuration, execution mode, harness binding,
plugins and resources become the revision's; then a deploy admits a new revision from them (at the revision's
log level), which --wait follows as occ agent deploy --wait does. The new revision runs the harness version
this installation approves now, and the Agent keeps its service principal and rollback policy.

A Configuration other Agents use is not changed in place (ROLLBACK_SHARED_CONFIGURATION): --config-copy NAME
saves the revision's document as Configuration NAME for this Agent alone. --dry-run=server lets the server check
the updates, changing nothing; the deploy is checked only when no update precedes it (it would be admitted
from the updated inputs). Refusals: ROLLBACK_NO_TARGET, ROLLBACK_SHARED_CONFIGURATION, ROLLBACK_UNSUPPORTED
(exit 1, nothing changed).`,
		Example:           "  occ agent rollback coder --wait\n  occ agent rollback coder --to 3\n  occ agent rollback coder --config-copy coder-rev3",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.complete(agentNames),
		RunE: func(cmd *cobra.Command, args []string) error {
			if wait && a.dryRun != "" {
				return usageError(errors.New("--wait and --dry-run exclude each other: a dry run starts nothing to wait for"))
			}
			if cmd.Flags().Changed("to") && to <= 0 {
				return usageError(fmt.Errorf("--to %d: want a revision number", to))
			}
			cl := a.client()
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			ns, name := a.settings.Namespace, args[0]
			ag, err := cl.Agent(ctx, ns, name)
			if err != nil {
				return err
			}
			revs, err := cl.Revisions(ctx, ns, name)
			if err != nil {
				return err
			}
			target, err := rollbackTarget(ag, revs, to)
			if err != nil {
				return err
			}
			steps, err := a.planRollback(ctx, cl, ag, target, configCopy)
			if err != nil {
				return err
			}
			errw := cmd.ErrOrStderr()
			fmt.Fprintf(errw, "rollback of agent %s to the inputs of revision %d\n", name, target.Number)
			for _, s := range steps {
				if err := s.do(ctx, cl); err != nil {
					return fmt.Errorf("%s: %w", s.what, err)
				}
				fmt.Fprintln(errw, s.what)
			}
			if a.dryRun != "" && len(steps) > 0 {
				fmt.Fprintln(errw, "deploy not checked: it would be admitted from the updated inputs")
				return nil
			}
			res, err := cl.Deploy(ctx, ns, name, wire.Deploy{LogLevel: logLevelOf(target.Document)})
			if err != nil {
				return err
			}
			cancel()
			return a.afterDeploy(cmd, cl, name, res, wait, timeout)
		},
	}
	c.Flags().Int64Var(&to, "to", 0, "the revision number to return to (default: the newest before the active one that served)")
	c.Flags().StringVar(&configCopy, "config-copy", "", "save the revision's document as this new Configuration and use it, leaving the current one as it is")
	c.Flags().BoolVar(&wait, "wait", false, "wait until the new revision is active or failed, showing progress")
	c.Flags().DurationVar(&timeout, "timeout", DefaultWaitTimeout, "how long --wait waits")
	a.addDryRun(c)
	return c
}

// afterDeploy prints an admitted deploy, or follows it with --wait, as
// occ agent deploy does.
func (a *app) afterDeploy(cmd *cobra.Command, cl *client.Client, agent string, res wire.DeployResult, wait bool, timeout time.Duration) error {
	out := cmd.OutOrStdout()
	if !wait {
		return a.print(out, res, func() table { return revisionTable("", res.Revision) })
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "revision %d (%s) admitted: %s/%s\n", res.Number, res.ID, res.Harness.ID, res.Mode)
	wctx, wcancel := context.WithTimeout(cmd.Context(), timeout)
	defer wcancel()
	rev, err := a.waitActive(wctx, cmd, cl, agent, res)
	if err != nil {
		return err
	}
	return a.print(out, rev, func() table { return revisionTable(rev.ID, rev) })
}
