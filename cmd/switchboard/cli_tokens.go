package main

import (
	"context"
	"fmt"

	"github.com/switchboard-mcp/switchboard/server/api/apiclient"
)

func (c *cli) tokensLs(cmd cliCommand, args []string) error {
	if _, err := c.parse(c.flags(cmd.name), cmd, args, 0, 0); err != nil {
		return err
	}
	out, done, err := do(c, func(ctx context.Context, api *apiclient.Client) (apiclient.Tokens, error) {
		return api.Tokens(ctx, c.project)
	})
	if done {
		return err
	}
	rows := make([][]string, 0, len(out.Tokens))
	for _, t := range out.Tokens {
		revoked := ""
		if t.RevokedAt != nil {
			revoked = when(*t.RevokedAt)
		}
		rows = append(rows, []string{t.ID, t.Name, when(t.CreatedAt), revoked})
	}
	return c.table([]string{"ID", "NAME", "CREATED", "REVOKED"}, rows)
}

// tokensCreate prints the new token alone on stdout, so that
// TOKEN=$(switchboard tokens create ci) works; the rest goes to stderr.
func (c *cli) tokensCreate(cmd cliCommand, args []string) error {
	pos, err := c.parse(c.flags(cmd.name), cmd, args, 1, 1)
	if err != nil {
		return err
	}
	t, done, err := do(c, func(ctx context.Context, api *apiclient.Client) (apiclient.Token, error) {
		return api.CreateToken(ctx, c.project, pos[0])
	})
	if done {
		return err
	}
	fmt.Fprintf(c.stderr, "created token %s (%s) for project %s; it is shown only now:\n", t.ID, t.Name, c.project)
	fmt.Fprintln(c.stdout, t.Token)
	return nil
}

func (c *cli) tokensRevoke(cmd cliCommand, args []string) error {
	pos, err := c.parse(c.flags(cmd.name), cmd, args, 1, 1)
	if err != nil {
		return err
	}
	t, done, err := do(c, func(ctx context.Context, api *apiclient.Client) (apiclient.Token, error) {
		return api.RevokeToken(ctx, c.project, pos[0])
	})
	if done {
		return err
	}
	fmt.Fprintf(c.stdout, "revoked token %s (%s) of project %s\n", t.ID, t.Name, c.project)
	return nil
}
