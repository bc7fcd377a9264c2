package occ

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"oce.dev/oce/coordinator/client"
)

// completionTimeout bounds the API call behind one shell completion.
const completionTimeout = 5 * time.Second

// lister names the resources a completion offers.
type lister func(ctx context.Context, cl *client.Client, ns string, args []string) ([]string, error)

var (
	namespaceNames lister = func(ctx context.Context, cl *client.Client, _ string, _ []string) ([]string, error) {
		nss, err := cl.Namespaces(ctx)
		out := make([]string, 0, len(nss))
		for _, n := range nss {
			out = append(out, n.Name)
		}
		return out, err
	}
	agentNames lister = func(ctx context.Context, cl *client.Client, ns string, _ []string) ([]string, error) {
		ags, err := cl.Agents(ctx, ns)
		out := make([]string, 0, len(ags))
		for _, a := range ags {
			out = append(out, a.Name)
		}
		return out, err
	}
	configNames lister = func(ctx context.Context, cl *client.Client, ns string, _ []string) ([]string, error) {
		cfs, err := cl.Configurations(ctx, ns)
		out := make([]string, 0, len(cfs))
		for _, c := range cfs {
			out = append(out, c.Name)
		}
		return out, err
	}
	// revisionNumbers completes the revision of the Agent named first.
	revisionNumbers lister = func(ctx context.Context, cl *client.Client, ns string, args []string) ([]string, error) {
		if len(args) == 0 {
			return nil, nil
		}
		revs, err := cl.Revisions(ctx, ns, args[0])
		out := make([]string, 0, len(revs))
		for _, r := range revs {
			out = append(out, itoa(r.Number)+"\t"+r.Status)
		}
		return out, err
	}
)

// complete returns a completion function offering, for the positional
// argument at position i, what listers[i] names (nothing past the end).
// It resolves the global flags itself: cobra runs no PreRun for completion.
func (a *app) complete(listers ...lister) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) >= len(listers) {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return a.completeWith(cmd, listers[len(args)], args, prefix)
	}
}

// completeFlag completes a flag's value with l.
func (a *app) completeFlag(l lister) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return a.completeWith(cmd, l, args, prefix)
	}
}

func (a *app) completeWith(cmd *cobra.Command, l lister, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
	s, err := a.resolve(cmd)
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	a.settings = s
	ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
	defer cancel()
	names, err := l(ctx, a.client(), s.Namespace, args)
	if err != nil {
		return nil, cobra.ShellCompDirectiveError | cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
