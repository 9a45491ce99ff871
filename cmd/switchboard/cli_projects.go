package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/switchboard-mcp/switchboard/server/api/apiclient"
)

// endpoint is the absolute MCP URL of a project, to paste into a client.
func (c *cli) endpoint(p apiclient.Project) string {
	if p.MCPURL == "" {
		return c.mcpEndpoint(p.ID)
	}
	if strings.Contains(p.MCPURL, "://") {
		return p.MCPURL
	}
	return c.gateway + p.MCPURL
}

func (c *cli) projectsLs(cmd cliCommand, args []string) error {
	if _, err := c.parse(c.flags(cmd.name), cmd, args, 0, 0); err != nil {
		return err
	}
	out, done, err := do(c, func(ctx context.Context, api *apiclient.Client) (apiclient.Projects, error) { return api.Projects(ctx) })
	if done {
		return err
	}
	rows := make([][]string, 0, len(out.Projects))
	for _, p := range out.Projects {
		rows = append(rows, []string{p.ID, c.endpoint(p), p.Description})
	}
	return c.table([]string{"ID", "MCP ENDPOINT", "DESCRIPTION"}, rows)
}

func (c *cli) projectsAdd(cmd cliCommand, args []string) error {
	fs := c.flags(cmd.name)
	desc := fs.String("description", "", "what the project is for")
	pos, err := c.parse(fs, cmd, args, 1, 1)
	if err != nil {
		return err
	}
	p, done, err := do(c, func(ctx context.Context, api *apiclient.Client) (apiclient.Project, error) {
		return api.CreateProject(ctx, apiclient.NewProject{ID: pos[0], Description: *desc})
	})
	if done {
		return err
	}
	fmt.Fprintf(c.stdout, "created project %s\nMCP endpoint: %s\n", p.ID, c.endpoint(p))
	return nil
}

func (c *cli) projectsRm(cmd cliCommand, args []string) error {
	fs := c.flags(cmd.name)
	force := fs.Bool("force", false, "delete it with its sandbox sessions, hosted servers, workspaces and volumes")
	pos, err := c.parse(fs, cmd, args, 1, 1)
	if err != nil {
		return err
	}
	if _, done, err := do(c, answerless(func(ctx context.Context, api *apiclient.Client) error {
		return api.DeleteProject(ctx, pos[0], *force)
	})); done {
		return err
	}
	fmt.Fprintf(c.stdout, "deleted project %s\n", pos[0])
	return nil
}
