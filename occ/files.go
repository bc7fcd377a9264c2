package occ

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/client"
	"oce.dev/oce/shared/codes"
)

// DefaultEditor runs when neither $VISUAL nor $EDITOR is set.
const DefaultEditor = "vi"

// ErrNoChange: the editor left the document as it was; nothing was saved.
var ErrNoChange = errors.New("no change")

func (a *app) filesCmd() *cobra.Command {
	c := &cobra.Command{Use: "files", Short: "List, read, write and edit an Agent's workspace documents",
		Example: "  occ agent files ls bot\n  occ agent files edit bot AGENTS.md",
		Long: `The four documents of an Agent's workspace (` + strings.Join(wire.WorkspaceDocuments(), ", ") + `),
read and written through the Agent's serving Gateway: its own workspace (embedded) or the
enrolled workspace node's (dedicated). A write names the version it replaces (the sha256 that
get and ls show, or "absent" for a new document); a document changed meanwhile is a conflict,
unless --force makes the write last-write-wins. After an uncertain save, reload before editing again.`}

	ls := &cobra.Command{
		Use: "ls AGENT", Short: "List the documents with their versions", Args: cobra.ExactArgs(1),
		Example: "  occ agent files ls bot",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			fs, err := a.client().Files(ctx, a.settings.Namespace, args[0])
			if err != nil {
				return err
			}
			return a.print(cmd.OutOrStdout(), fs, func() table { return filesTable(fs.Files...) })
		},
	}
	get := &cobra.Command{
		Use: "get AGENT NAME", Short: "Print a document (its version goes to stderr)", Args: cobra.ExactArgs(2),
		Example: "  occ agent files get bot AGENTS.md > AGENTS.md",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			f, err := a.client().File(ctx, a.settings.Namespace, args[0], args[1])
			if err != nil {
				return err
			}
			if a.settings.Output == "json" || a.settings.Output == "yaml" {
				return a.print(cmd.OutOrStdout(), f, nil)
			}
			if f.Missing {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s does not exist yet (version %s)\n", f.Name, wire.VersionAbsent)
				return nil
			}
			fmt.Fprint(cmd.OutOrStdout(), f.Content)
			fmt.Fprintf(cmd.ErrOrStderr(), "version %s\n", f.SHA256)
			return nil
		},
	}

	var file, replaces string
	var force bool
	put := &cobra.Command{
		Use:   "put AGENT NAME -f FILE (--replaces VERSION | --force)",
		Short: "Write a document from a file or stdin",
		Example: `  occ agent files put bot AGENTS.md -f AGENTS.md --replaces 3f2a…   # the version get printed
  occ agent files put bot USER.md -f - --replaces absent < USER.md
  occ agent files put bot SOUL.md -f SOUL.md --force               # last write wins`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if file == "" {
				return usageError(errors.New("-f FILE (or - for stdin) is required"))
			}
			if replaces == "" && !force {
				return usageError(errors.New("name the version the write replaces (--replaces, \"absent\" for a new document) or --force"))
			}
			var in io.Reader = a.opts.Stdin
			if file != "-" {
				fh, err := os.Open(file)
				if err != nil {
					return err
				}
				defer fh.Close()
				in = fh
			}
			data, err := readDocument(in)
			if err != nil {
				return err
			}
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			f, err := a.client().PutFile(ctx, a.settings.Namespace, args[0], args[1],
				wire.PutWorkspaceFile{Content: string(data), Replaces: replaces, Force: force})
			if err != nil {
				return explainWrite(err, args[1], "")
			}
			return a.print(cmd.OutOrStdout(), f, func() table { return filesTable(f) })
		},
	}
	put.Flags().StringVarP(&file, "file", "f", "", "the document's new content ('-' for stdin)")
	put.Flags().StringVar(&replaces, "replaces", "", "the version (sha256) this write replaces, or \"absent\"")
	put.Flags().BoolVar(&force, "force", false, "write whatever the current version is (last write wins)")

	edit := &cobra.Command{
		Use: "edit AGENT NAME", Short: "Edit a document in $VISUAL or $EDITOR and save it", Args: cobra.ExactArgs(2),
		Example: "  EDITOR=nano occ agent files edit bot SOUL.md",
		RunE: func(cmd *cobra.Command, args []string) error {
			err := a.editFile(cmd, args[0], args[1])
			if errors.Is(err, ErrNoChange) {
				fmt.Fprintf(cmd.OutOrStdout(), "%s unchanged; nothing saved\n", args[1])
				return nil
			}
			return err
		},
	}
	c.AddCommand(ls, get, put, edit)
	return c
}

// readDocument reads a document, refusing what the API would refuse.
func readDocument(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, wire.MaxDocumentBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > wire.MaxDocumentBytes {
		return nil, fmt.Errorf("%s: the document is larger than %d KiB", wire.ReasonDocumentTooLarge, wire.MaxDocumentBytes>>10)
	}
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("%s: the document is not UTF-8 text", wire.ReasonDocumentNotUTF8)
	}
	return data, nil
}

// editFile fetches the document, opens it in the editor and saves the edit
// naming the version it started from. A conflict or an uncertain save keeps
// the edit in its file and says how to go on.
func (a *app) editFile(cmd *cobra.Command, agent, name string) error {
	ctx, cancel := a.ctx(cmd)
	f, err := a.client().File(ctx, a.settings.Namespace, agent, name)
	cancel()
	if err != nil {
		return err
	}
	version := f.SHA256
	if f.Missing {
		version = wire.VersionAbsent
	}
	dir, err := os.MkdirTemp("", "occ-edit-")
	if err != nil {
		return err
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(f.Content), 0o600); err != nil {
		return err
	}
	keep := false
	defer func() {
		if !keep {
			_ = os.RemoveAll(dir)
		}
	}()
	if err := a.runEditor(cmd.Context(), path); err != nil {
		return fmt.Errorf("editor: %w; nothing saved", err)
	}
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	data, err := readDocument(fh)
	fh.Close()
	if err != nil {
		keep = true
		return fmt.Errorf("%w (your edit is in %s)", err, path)
	}
	if string(data) == f.Content {
		return ErrNoChange
	}
	ctx, cancel = a.ctx(cmd)
	defer cancel()
	saved, err := a.client().PutFile(ctx, a.settings.Namespace, agent, name,
		wire.PutWorkspaceFile{Content: string(data), Replaces: version})
	if err != nil {
		keep = true
		return explainWrite(err, name, path)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "saved %s (version %s)\n", name, saved.SHA256)
	return nil
}

// explainWrite turns a failed write into what to do next: a conflict names
// the current version; an uncertain outcome asks for a reload first.
func explainWrite(err error, name, kept string) error {
	where := ""
	if kept != "" {
		where = "; your edit is kept in " + kept
	}
	var ce *client.Error
	if errors.As(err, &ce) {
		switch {
		case ce.Code == codes.ResourceConflict && ce.Details["reason"] == wire.ReasonWorkspaceConflict:
			return fmt.Errorf("%s changed since the version you started from (now %v)%s: reload it and edit again, "+
				"or write yours over it with put --force: %w", name, ce.Details["current"], where, err)
		case ce.Status < 500:
			if r, ok := ce.Details["reason"].(string); ok {
				return fmt.Errorf("%s: %w%s", r, err, where)
			}
			return fmt.Errorf("%w%s", err, where)
		}
	}
	return fmt.Errorf("the save of %s may or may not have happened (%w)%s: reload it (occ agent files get) before editing again",
		name, err, where)
}

// runEditor runs $VISUAL or $EDITOR (a shell word list, like git) on path
// with the terminal.
func (a *app) runEditor(ctx context.Context, path string) error {
	ed := a.opts.Getenv("VISUAL")
	if ed == "" {
		ed = a.opts.Getenv("EDITOR")
	}
	if ed == "" {
		ed = DefaultEditor
	}
	c := exec.CommandContext(ctx, "/bin/sh", "-c", ed+` "$1"`, "occ-editor", path)
	c.Stdin, c.Stdout, c.Stderr = a.opts.Stdin, a.opts.Stdout, a.opts.Stderr
	c.WaitDelay = time.Second
	return c.Run()
}

func filesTable(fs ...wire.WorkspaceFile) table {
	t := table{header: []string{"NAME", "SIZE", "UPDATED", "VERSION"}}
	for _, f := range fs {
		if f.Missing {
			t.rows = append(t.rows, []string{f.Name, "-", "-", wire.VersionAbsent})
			continue
		}
		upd := "-"
		if f.UpdatedAtMs > 0 {
			upd = ts(time.UnixMilli(f.UpdatedAtMs))
		}
		t.rows = append(t.rows, []string{f.Name, itoa(f.Size), upd, f.SHA256})
	}
	return t
}
