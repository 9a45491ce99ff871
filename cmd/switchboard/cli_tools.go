package main

import (
	"net/http"
)

func (c *cli) toolsLs(cmd cliCommand, args []string) error {
	if _, err := c.parse(c.flags(cmd.name), cmd, args, 0, 0); err != nil {
		return err
	}
	var out struct {
		Tools []struct {
			Name   string `json:"name"`
			Server string `json:"server"`
			Tool   struct {
				Description string `json:"description"`
			} `json:"tool"`
		} `json:"tools"`
	}
	raw, err := c.api(http.MethodGet, c.projectPath("tools"), nil, &out)
	if err != nil || c.json {
		return orJSON(c, raw, err)
	}
	rows := make([][]string, 0, len(out.Tools))
	for _, t := range out.Tools {
		rows = append(rows, []string{t.Name, t.Server, firstLine(t.Tool.Description)})
	}
	return c.table([]string{"TOOL", "SERVER", "DESCRIPTION"}, rows)
}
