package main

import (
	"context"
	"encoding/json"

	"github.com/switchboard-mcp/switchboard/server/api/apiclient"
)

func (c *cli) toolsLs(cmd cliCommand, args []string) error {
	if _, err := c.parse(c.flags(cmd.name), cmd, args, 0, 0); err != nil {
		return err
	}
	out, done, err := do(c, func(ctx context.Context, api *apiclient.Client) (apiclient.Tools, error) {
		return api.Tools(ctx, c.project)
	})
	if done {
		return err
	}
	rows := make([][]string, 0, len(out.Tools))
	for _, t := range out.Tools {
		var tool struct {
			Description string `json:"description"`
		}
		_ = json.Unmarshal(t.Tool, &tool)
		rows = append(rows, []string{t.Name, t.Server, firstLine(tool.Description)})
	}
	return c.table([]string{"TOOL", "SERVER", "DESCRIPTION"}, rows)
}
