package occ

import (
	"bytes"
	"context"
	"time"

	"github.com/spf13/cobra"
)

// fetchFunc reads what a get or list command shows: the value for the
// structured formats and its table.
type fetchFunc func(ctx context.Context) (v any, tbl func() table, err error)

// addWatch adds -w/--watch to a get or list command.
func addWatch(c *cobra.Command, watch *bool) {
	c.Flags().BoolVarP(watch, "watch", "w", false, "keep printing the result whenever it changes (Ctrl-C ends)")
}

// show prints what fetch reads; with watch it prints again whenever the
// result changes, until the command's context ends.
func (a *app) show(cmd *cobra.Command, watch bool, fetch fetchFunc) error {
	render := func(ctx context.Context) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, DefaultRequestTimeout)
		defer cancel()
		v, tbl, err := fetch(ctx)
		if err != nil {
			return "", err
		}
		var b bytes.Buffer
		if err := a.print(&b, v, tbl); err != nil {
			return "", err
		}
		return b.String(), nil
	}
	ctx := cmd.Context()
	out := cmd.OutOrStdout()
	last, index := "", uint64(0)
	for {
		s, err := render(ctx)
		if err != nil {
			return err
		}
		if s != last {
			if _, err := out.Write([]byte(s)); err != nil {
				return err
			}
			last = s
		}
		if !watch {
			return nil
		}
		if index, err = a.waitForChange(ctx, index); err != nil {
			return err
		}
	}
}

// waitForChange returns once the coordinator's state may have changed
// since index, with the index to wait on next: a blocking query
// (GET /v1/index?index=N&wait=D) that answers as soon as the state moves.
// A coordinator that cannot answer one now is polled every PollInterval.
func (a *app) waitForChange(ctx context.Context, index uint64) (uint64, error) {
	next, err := a.client().WaitIndex(ctx, index, changeWait)
	if err == nil {
		return next, nil
	}
	if ctx.Err() != nil {
		return index, ctx.Err()
	}
	t := time.NewTimer(a.opts.PollInterval)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return index, ctx.Err()
	case <-t.C:
		return index, nil
	}
}
