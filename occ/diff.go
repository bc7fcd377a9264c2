package occ

import (
	"errors"
	"fmt"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"github.com/spf13/cobra"
)

// Exit codes of occ diff, as kubectl diff's: scripts branch on them.
const (
	DiffSame    = 0 // the coordinator holds what the manifests state
	DiffChanged = 1 // apply would change something
	DiffError   = 2 // bad manifests, or a request failed
)

// ErrDiffers: occ diff found changes (exit 1).
var ErrDiffers = errors.New("the manifests differ from the coordinator")

// unifiedDiff renders one change: the coordinator's normal form against the
// manifest's, as a unified diff with three lines of context.
func unifiedDiff(c *change) (string, error) {
	name := c.obj.ref()
	return difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A:        lines(renderForm(c.current)),
		B:        lines(renderForm(c.desired)),
		FromFile: "coordinator/" + name,
		ToFile:   "manifest/" + name,
		Context:  3,
	})
}

func (a *app) diffCmd() *cobra.Command {
	var files []string
	var recursive bool
	c := &cobra.Command{
		Use:   "diff -f FILE|DIR",
		Short: "Show what occ apply would change, as a unified diff per object",
		Long: `diff reads manifests as occ apply does and prints, for every object apply would create or configure, a
unified diff of the coordinator's current form of it (empty when absent) against the manifest's, with the
defaults the coordinator fills in (executionMode embedded, the Agent's own service principal, a rollback
window of 5m0s) written out. Only the fields a manifest states are compared: ids, times, status and revision
counts are not. It sends no write.

Exit codes (as kubectl diff): 0 no differences, 1 differences, 2 bad manifests or a failed request.`,
		Example: "  occ diff -f team-a/\n  occ diff -f team-a/ && echo in sync",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			changes, err := a.loadPlan(ctx, files, recursive)
			if err != nil {
				return &ExitError{Code: DiffError, Err: err}
			}
			out := cmd.OutOrStdout()
			n := 0
			for _, c := range changes {
				if c.action == actionUnchanged {
					continue
				}
				n++
				d, err := unifiedDiff(c)
				if err != nil {
					return &ExitError{Code: DiffError, Err: err}
				}
				if _, err := fmt.Fprint(out, d); err != nil {
					return &ExitError{Code: DiffError, Err: err}
				}
			}
			if n > 0 {
				return &ExitError{Code: DiffChanged, Err: fmt.Errorf("%w: %d object(s) would change", ErrDiffers, n)}
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringArrayVarP(&files, "filename", "f", nil, "a manifest file, a directory of them, or '-' for stdin (repeatable)")
	f.BoolVarP(&recursive, "recursive", "R", false, "read the directories' subdirectories too")
	return c
}

// lines splits text into lines that keep their ends; none for "".
func lines(text string) []string {
	if text == "" {
		return nil
	}
	out := strings.SplitAfter(text, "\n")
	if out[len(out)-1] == "" {
		return out[:len(out)-1]
	}
	out[len(out)-1] += "\n" // renderForm ends every line; be safe
	return out
}
