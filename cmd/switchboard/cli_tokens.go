package main

import (
	"fmt"
	"net/http"
)

type apiToken struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	CreatedAt string `json:"created_at"`
	RevokedAt string `json:"revoked_at"`
	Token     string `json:"token"`
}

func (c *cli) tokensLs(cmd cliCommand, args []string) error {
	if _, err := c.parse(c.flags(cmd.name), cmd, args, 0, 0); err != nil {
		return err
	}
	var out struct {
		Tokens []apiToken `json:"tokens"`
	}
	raw, err := c.api(http.MethodGet, c.projectPath("tokens"), nil, &out)
	if err != nil || c.json {
		return orJSON(c, raw, err)
	}
	rows := make([][]string, 0, len(out.Tokens))
	for _, t := range out.Tokens {
		revoked := ""
		if t.RevokedAt != "" {
			revoked = when(t.RevokedAt)
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
	var t apiToken
	raw, err := c.api(http.MethodPost, c.projectPath("tokens"), map[string]string{"name": pos[0]}, &t)
	if err != nil || c.json {
		return orJSON(c, raw, err)
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
	var t apiToken
	raw, err := c.api(http.MethodDelete, c.projectPath("tokens", pos[0]), nil, &t)
	if err != nil || c.json {
		return orJSON(c, raw, err)
	}
	fmt.Fprintf(c.stdout, "revoked token %s (%s) of project %s\n", t.ID, t.Name, c.project)
	return nil
}
