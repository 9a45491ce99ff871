package main

import (
	"fmt"
	"net/http"
	"strings"
)

type apiProject struct {
	ID          string `json:"id"`
	Description string `json:"description"`
	MCPURL      string `json:"mcp_url"`
	CreatedAt   string `json:"created_at"`
}

// endpoint is the absolute MCP URL of a project, to paste into a client.
func (c *cli) endpoint(p apiProject) string {
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
	var out struct {
		Projects []apiProject `json:"projects"`
	}
	raw, err := c.api(http.MethodGet, "/projects", nil, &out)
	if err != nil || c.json {
		return orJSON(c, raw, err)
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
	var p apiProject
	raw, err := c.api(http.MethodPost, "/projects", map[string]string{"id": pos[0], "description": *desc}, &p)
	if err != nil || c.json {
		return orJSON(c, raw, err)
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
	c.project = pos[0]
	path := c.projectPath()
	if *force {
		path += "?force=true"
	}
	raw, err := c.api(http.MethodDelete, path, nil, nil)
	if err != nil || c.json {
		return orJSON(c, raw, err)
	}
	fmt.Fprintf(c.stdout, "deleted project %s\n", pos[0])
	return nil
}
