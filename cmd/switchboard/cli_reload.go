package main

import (
	"context"
	"fmt"

	"github.com/switchboard-mcp/switchboard/server/api/apiclient"
)

func (c *cli) reload(cmd cliCommand, args []string) error {
	if _, err := c.parse(c.flags(cmd.name), cmd, args, 0, 0); err != nil {
		return err
	}
	res, done, err := do(c, func(ctx context.Context, api *apiclient.Client) (apiclient.Reloaded, error) { return api.Reload(ctx) })
	if done {
		return err
	}
	fmt.Fprintf(c.stdout, "reloaded the servers file: %d servers\n", res.Servers)
	return nil
}
