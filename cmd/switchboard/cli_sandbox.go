package main

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/server/api/apiclient"
)

// The workspace and sandbox-switch commands: thin calls of the admin API
// (/api/v1/projects/{p}/workspaces, /snapshots, /sandbox).
func init() {
	cliCommands = append(cliCommands,
		cliCommand{"workspaces ls", "", "List the project's sandbox workspaces and snapshots.", (*cli).workspacesLs},
		cliCommand{"workspaces show", "ID", "Show a workspace or snapshot: status, holder, session, when an anonymous one expires, and its attach history.", (*cli).workspacesShow},
		cliCommand{"workspaces rm", "ID [--force]", "Delete a workspace or snapshot for good: its session stops and its files are removed; one an agent session holds only with --force (admin).", (*cli).workspacesRm},
		cliCommand{"workspaces attach", "ID --agent NAME", "Attach a workspace to agent session NAME, exclusively, and print the sandbox session on it.", (*cli).workspacesAttach},
		cliCommand{"workspaces detach", "ID [--force]", "Detach a workspace: its session stops, its files stay; one another agent session holds only with --force (admin).", workspaceOp("detach")},
		cliCommand{"workspaces snapshot", "ID [--force]", "Snapshot a workspace and print the snapshot's id; one another agent session holds only with --force (admin).", workspaceOp("snapshot")},
		cliCommand{"workspaces restore", "SNAPSHOT", "Restore a snapshot into a new workspace and print its id.", workspaceOp("restore")},
		cliCommand{"sandbox enable", "", "Serve the sandbox tools on the project's endpoint (stored; every replica follows).", sandboxSwitch(true)},
		cliCommand{"sandbox disable", "", "Stop serving the sandbox tools on the project's endpoint (stored; every replica follows).", sandboxSwitch(false)},
	)
}

func (c *cli) workspacesLs(cmd cliCommand, args []string) error {
	if _, err := c.parse(c.flags(cmd.name), cmd, args, 0, 0); err != nil {
		return err
	}
	out, done, err := do(c, func(ctx context.Context, api *apiclient.Client) (apiclient.Workspaces, error) {
		return api.Workspaces(ctx, c.project)
	})
	if done {
		return err
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKSPACE\tSTATUS\tAGENT SESSION\tSANDBOX SESSION\tSNAPSHOT OF\tLAST USED")
	for _, w := range out.Workspaces {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", w.WorkspaceID, w.Status, dash(w.AgentSessionID), dash(w.SessionID), dash(w.SnapshotOf), dash(stamp(w.LastUsedAt)))
	}
	return tw.Flush()
}

func dash(s string) string { return orText(s, "-") }

func (c *cli) workspacesShow(cmd cliCommand, args []string) error {
	pos, err := c.parse(c.flags(cmd.name), cmd, args, 1, 1)
	if err != nil {
		return err
	}
	w, done, err := do(c, func(ctx context.Context, api *apiclient.Client) (switchboard.WorkspaceInfo, error) {
		return api.Workspace(ctx, c.project, pos[0])
	})
	if done {
		return err
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "workspace\t%s\n", w.WorkspaceID)
	fmt.Fprintf(tw, "status\t%s\n", w.Status)
	fmt.Fprintf(tw, "snapshot of\t%s\n", dash(w.SnapshotOf))
	fmt.Fprintf(tw, "agent session\t%s\n", dash(w.AgentSessionID))
	fmt.Fprintf(tw, "sandbox session\t%s\n", dash(w.SessionID))
	fmt.Fprintf(tw, "last used\t%s\n", dash(stamp(w.LastUsedAt)))
	if w.Anonymous {
		expires := ""
		if w.ExpiresAt != nil {
			expires = stamp(*w.ExpiresAt)
		}
		fmt.Fprintf(tw, "anonymous\tdeleted at %s\n", orText(expires, "its retention after its session ends"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(w.AttachHistory) == 0 {
		return nil
	}
	fmt.Fprintln(c.stdout, "attach history (oldest first):")
	tw = tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  AT\tPREVIOUS AGENT SESSION\tAGENT SESSION")
	for _, a := range w.AttachHistory {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", stamp(a.At), dash(a.Previous), a.Holder)
	}
	return tw.Flush()
}

func orText(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// forceFlag is --force of the workspace operations a hold refuses.
func forceFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("force", false, "also when another agent session holds it (the admin token)")
}

func (c *cli) workspacesRm(cmd cliCommand, args []string) error {
	fs := c.flags(cmd.name)
	force := forceFlag(fs)
	pos, err := c.parse(fs, cmd, args, 1, 1)
	if err != nil {
		return err
	}
	if _, done, err := do(c, answerless(func(ctx context.Context, api *apiclient.Client) error {
		return api.DeleteWorkspace(ctx, c.project, pos[0], *force)
	})); done {
		return err
	}
	fmt.Fprintf(c.stdout, "deleted workspace %s from project %s\n", pos[0], c.project)
	return nil
}

func (c *cli) workspacesAttach(cmd cliCommand, args []string) error {
	fs := c.flags(cmd.name)
	agent := fs.String("agent", "", "the agent session that holds the workspace (required)")
	pos, err := c.parse(fs, cmd, args, 1, 1)
	if err != nil {
		return err
	}
	if *agent == "" {
		return &usageError{cmd: cmd.name, msg: "--agent is required"}
	}
	out, done, err := do(c, func(ctx context.Context, api *apiclient.Client) (switchboard.SandboxSession, error) {
		return api.AttachWorkspace(ctx, c.project, pos[0], *agent)
	})
	if done {
		return err
	}
	fmt.Fprintf(c.stdout, "attached workspace %s to %s; sandbox session %s\n", pos[0], *agent, out.SessionID)
	return nil
}

func workspaceOp(op string) func(c *cli, cmd cliCommand, args []string) error {
	return func(c *cli, cmd cliCommand, args []string) error {
		fs := c.flags(cmd.name)
		force := new(bool)
		if op != "restore" {
			force = forceFlag(fs)
		}
		pos, err := c.parse(fs, cmd, args, 1, 1)
		if err != nil {
			return err
		}
		w, done, err := do(c, func(ctx context.Context, api *apiclient.Client) (switchboard.WorkspaceInfo, error) {
			switch op {
			case "detach":
				return api.DetachWorkspace(ctx, c.project, pos[0], *force)
			case "snapshot":
				return api.SnapshotWorkspace(ctx, c.project, pos[0], *force)
			}
			return api.RestoreSnapshot(ctx, c.project, pos[0])
		})
		if done {
			return err
		}
		switch op {
		case "detach":
			fmt.Fprintf(c.stdout, "detached workspace %s\n", pos[0])
		case "snapshot":
			fmt.Fprintf(c.stdout, "snapshot %s of workspace %s\n", w.WorkspaceID, pos[0])
		case "restore":
			fmt.Fprintf(c.stdout, "workspace %s restored from snapshot %s\n", w.WorkspaceID, pos[0])
		}
		return nil
	}
}

func sandboxSwitch(on bool) func(c *cli, cmd cliCommand, args []string) error {
	return func(c *cli, cmd cliCommand, args []string) error {
		if _, err := c.parse(c.flags(cmd.name), cmd, args, 0, 0); err != nil {
			return err
		}
		if _, done, err := do(c, func(ctx context.Context, api *apiclient.Client) (apiclient.SandboxSwitch, error) {
			return api.SetSandbox(ctx, c.project, on)
		}); done {
			return err
		}
		state := "off"
		if on {
			state = "on"
		}
		fmt.Fprintf(c.stdout, "sandbox tools %s in project %s\n", state, c.project)
		return nil
	}
}

// stamp shows an API time as the API writes it (RFC 3339); the zero time
// is "".
func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format(time.RFC3339Nano)
}
