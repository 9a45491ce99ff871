package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"unicode/utf8"
)

type apiSecret struct {
	Name      string `json:"name"`
	UpdatedAt string `json:"updated_at"`
}

func (c *cli) secretsLs(cmd cliCommand, args []string) error {
	if _, err := c.parse(c.flags(cmd.name), cmd, args, 0, 0); err != nil {
		return err
	}
	var out struct {
		Secrets []apiSecret `json:"secrets"`
	}
	raw, err := c.api(http.MethodGet, c.projectPath("secrets"), nil, &out)
	if err != nil || c.json {
		return orJSON(c, raw, err)
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
	var s apiSecret
	raw, err := c.api(http.MethodPut, c.projectPath("secrets", pos[0]), map[string]string{"value": value}, &s)
	if err != nil || c.json {
		return orJSON(c, raw, err)
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
	raw, err := c.api(http.MethodDelete, c.projectPath("secrets", pos[0]), nil, nil)
	if err != nil || c.json {
		return orJSON(c, raw, err)
	}
	fmt.Fprintf(c.stdout, "deleted secret %s from project %s\n", pos[0], c.project)
	return nil
}
