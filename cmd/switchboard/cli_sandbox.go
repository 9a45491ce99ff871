package main

import (
	"fmt"
	"net/http"
	"text/tabwriter"
)

// The workspace and sandbox-switch commands: thin calls of the admin API
// (/api/v1/projects/{p}/workspaces, /snapshots, /sandbox).
func init() {
	cliCommands = append(cliCommands,
		cliCommand{"workspaces ls", "", "List the project's sandbox workspaces and snapshots.", (*cli).workspacesLs},
		cliCommand{"workspaces show", "ID", "Show a workspace or snapshot: status, holder, session, when an anonymous one expires, and its attach history.", (*cli).workspacesShow},
		cliCommand{"workspaces rm", "ID", "Delete a workspace or snapshot for good: its session stops (also one an agent session holds) and its files are removed.", (*cli).workspacesRm},
		cliCommand{"workspaces attach", "ID --agent NAME", "Attach a workspace to agent session NAME, exclusively, and print the sandbox session on it.", (*cli).workspacesAttach},
		cliCommand{"workspaces detach", "ID", "Detach a workspace: its session stops, its files stay.", workspaceOp("detach")},
		cliCommand{"workspaces snapshot", "ID", "Snapshot a workspace and print the snapshot's id.", workspaceOp("snapshot")},
		cliCommand{"workspaces restore", "SNAPSHOT", "Restore a snapshot into a new workspace and print its id.", workspaceOp("restore")},
		cliCommand{"sandbox enable", "", "Serve the sandbox tools on the project's endpoint (stored; every replica follows).", sandboxSwitch(true)},
		cliCommand{"sandbox disable", "", "Stop serving the sandbox tools on the project's endpoint (stored; every replica follows).", sandboxSwitch(false)},
	)
}

type apiWorkspace struct {
	WorkspaceID    string `json:"workspace_id"`
	Status         string `json:"status"`
	AgentSessionID string `json:"agent_session_id"`
	SessionID      string `json:"session_id"`
	SnapshotOf     string `json:"snapshot_of"`
	LastUsedAt     string `json:"last_used_at"`
	Anonymous      bool   `json:"anonymous"`
	ExpiresAt      string `json:"expires_at"`
	AttachHistory  []struct {
		Previous string `json:"previous_agent_session_id"`
		Holder   string `json:"agent_session_id"`
		At       string `json:"at"`
	} `json:"attach_history"`
}

func (c *cli) workspacesLs(cmd cliCommand, args []string) error {
	if _, err := c.parse(c.flags(cmd.name), cmd, args, 0, 0); err != nil {
		return err
	}
	var out struct {
		Workspaces []apiWorkspace `json:"workspaces"`
	}
	raw, err := c.api(http.MethodGet, c.projectPath("workspaces"), nil, &out)
	if err != nil || c.json {
		return orJSON(c, raw, err)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKSPACE\tSTATUS\tAGENT SESSION\tSANDBOX SESSION\tSNAPSHOT OF\tLAST USED")
	for _, w := range out.Workspaces {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", w.WorkspaceID, w.Status, dash(w.AgentSessionID), dash(w.SessionID), dash(w.SnapshotOf), dash(w.LastUsedAt))
	}
	return tw.Flush()
}

func dash(s string) string { return orText(s, "-") }

func (c *cli) workspacesShow(cmd cliCommand, args []string) error {
	pos, err := c.parse(c.flags(cmd.name), cmd, args, 1, 1)
	if err != nil {
		return err
	}
	var w apiWorkspace
	raw, err := c.api(http.MethodGet, c.projectPath("workspaces", pos[0]), nil, &w)
	if err != nil || c.json {
		return orJSON(c, raw, err)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "workspace\t%s\n", w.WorkspaceID)
	fmt.Fprintf(tw, "status\t%s\n", w.Status)
	fmt.Fprintf(tw, "snapshot of\t%s\n", dash(w.SnapshotOf))
	fmt.Fprintf(tw, "agent session\t%s\n", dash(w.AgentSessionID))
	fmt.Fprintf(tw, "sandbox session\t%s\n", dash(w.SessionID))
	fmt.Fprintf(tw, "last used\t%s\n", dash(w.LastUsedAt))
	if w.Anonymous {
		fmt.Fprintf(tw, "anonymous\tdeleted at %s\n", orText(w.ExpiresAt, "its retention after its session ends"))
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
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", a.At, dash(a.Previous), a.Holder)
	}
	return tw.Flush()
}

func orText(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func (c *cli) workspacesRm(cmd cliCommand, args []string) error {
	pos, err := c.parse(c.flags(cmd.name), cmd, args, 1, 1)
	if err != nil {
		return err
	}
	raw, err := c.api(http.MethodDelete, c.projectPath("workspaces", pos[0]), nil, nil)
	if err != nil || c.json {
		return orJSON(c, raw, err)
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
	var out struct {
		SessionID string `json:"session_id"`
	}
	raw, err := c.api(http.MethodPost, c.projectPath("workspaces", pos[0], "attach"), map[string]string{"agent_session_id": *agent}, &out)
	if err != nil || c.json {
		return orJSON(c, raw, err)
	}
	fmt.Fprintf(c.stdout, "attached workspace %s to %s; sandbox session %s\n", pos[0], *agent, out.SessionID)
	return nil
}

func workspaceOp(op string) func(c *cli, cmd cliCommand, args []string) error {
	return func(c *cli, cmd cliCommand, args []string) error {
		pos, err := c.parse(c.flags(cmd.name), cmd, args, 1, 1)
		if err != nil {
			return err
		}
		path := c.projectPath("workspaces", pos[0], op)
		if op == "restore" {
			path = c.projectPath("snapshots", pos[0], op)
		}
		var w apiWorkspace
		raw, err := c.api(http.MethodPost, path, nil, &w)
		if err != nil || c.json {
			return orJSON(c, raw, err)
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
		raw, err := c.api(http.MethodPut, c.projectPath("sandbox"), map[string]bool{"enabled": on}, nil)
		if err != nil || c.json {
			return orJSON(c, raw, err)
		}
		state := "off"
		if on {
			state = "on"
		}
		fmt.Fprintf(c.stdout, "sandbox tools %s in project %s\n", state, c.project)
		return nil
	}
}
