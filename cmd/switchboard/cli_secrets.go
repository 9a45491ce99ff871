package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/server/api/apiclient"
)

func (c *cli) secretsLs(cmd cliCommand, args []string) error {
	if _, err := c.parse(c.flags(cmd.name), cmd, args, 0, 0); err != nil {
		return err
	}
	out, done, err := do(c, func(ctx context.Context, api *apiclient.Client) (apiclient.Secrets, error) {
		return api.Secrets(ctx, c.project)
	})
	if done {
		return err
	}
	rows := make([][]string, 0, len(out.Secrets))
	for _, s := range out.Secrets {
		rows = append(rows, []string{s.Name, when(s.UpdatedAt)})
	}
	return c.table([]string{"NAME", "UPDATED"}, rows)
}

func (c *cli) secretsSet(cmd cliCommand, args []string) error {
	pos, err := c.parse(c.flags(cmd.name), cmd, args, 1, 2)
	if err != nil {
		return err
	}
	var value string
	if len(pos) == 2 {
		value = pos[1]
	} else {
		if f, ok := c.stdin.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				fmt.Fprintf(c.stderr, "value of %s (then Enter and Ctrl-D): ", pos[0])
			}
		}
		value, err = readSecret(c.stdin)
		if err != nil {
			return fmt.Errorf("%s: %w", cmd.name, err)
		}
	}
	if value == "" {
		return &usageError{cmd: cmd.name, msg: "the value is empty"}
	}
	s, done, err := do(c, func(ctx context.Context, api *apiclient.Client) (apiclient.Secret, error) {
		return api.SetSecret(ctx, c.project, pos[0], value)
	})
	if done {
		return err
	}
	fmt.Fprintf(c.stdout, "set secret %s in project %s\n", s.Name, c.project)
	return nil
}

// readSecret reads a secret value from r, without one trailing newline
// (\n or \r\n) as echo and editors add. It refuses an empty value and one
// over the API's limit.
func readSecret(r io.Reader) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxSecretBytes+3))
	if err != nil {
		return "", fmt.Errorf("reading the value from stdin: %w", err)
	}
	if len(b) > 0 && b[len(b)-1] == '\n' {
		b = b[:len(b)-1]
		if len(b) > 0 && b[len(b)-1] == '\r' {
			b = b[:len(b)-1]
		}
	}
	switch {
	case len(b) == 0:
		return "", errors.New("the value on stdin is empty; pipe it in, such as: printf %s \"$VALUE\" | switchboard secrets set NAME")
	case len(b) > maxSecretBytes:
		return "", fmt.Errorf("the value is over %d bytes", maxSecretBytes)
	case !utf8.Valid(b):
		return "", errors.New("the value is not UTF-8 text")
	}
	return string(b), nil
}

func (c *cli) secretsRm(cmd cliCommand, args []string) error {
	pos, err := c.parse(c.flags(cmd.name), cmd, args, 1, 1)
	if err != nil {
		return err
	}
	if _, done, err := do(c, answerless(func(ctx context.Context, api *apiclient.Client) error {
		return api.DeleteSecret(ctx, c.project, pos[0])
	})); done {
		return err
	}
	fmt.Fprintf(c.stdout, "deleted secret %s from project %s\n", pos[0], c.project)
	return nil
}
