package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/switchboard-mcp/switchboard/server/api/apiclient"
)

func (c *cli) history(cmd cliCommand, args []string) error {
	fs := c.flags(cmd.name)
	server := fs.String("server", "", "only calls to this server")
	tool := fs.String("tool", "", "only calls of this tool")
	outcome := fs.String("outcome", "", "only calls with this outcome: ok, tool_error or error")
	since := fs.String("since", "", "only calls since `T`: RFC 3339 time or a duration ago such as 1h")
	limit := fs.Int("limit", 50, "at most `N` calls (1..1000)")
	cursor := fs.String("cursor", "", "continue a listing where the previous one stopped")
	if _, err := c.parse(fs, cmd, args, 0, 0); err != nil {
		return err
	}
	bad := func(msg string) error { return &usageError{cmd: cmd.name, msg: msg} }
	q := apiclient.CallQuery{Server: *server, Tool: *tool, Outcome: *outcome, Cursor: *cursor, Limit: *limit}
	switch *outcome {
	case "", "ok", "tool_error", "error":
	default:
		return bad(fmt.Sprintf("--outcome %q: want ok, tool_error or error", *outcome))
	}
	if *limit < 1 || *limit > 1000 {
		return bad("--limit must be in 1..1000")
	}
	if *since != "" {
		t, err := time.Parse(time.RFC3339Nano, *since)
		if err != nil {
			d, derr := time.ParseDuration(*since)
			if derr != nil || d < 0 {
				return bad(fmt.Sprintf("--since %q: want an RFC 3339 time or a duration such as 1h", *since))
			}
			t = time.Now().Add(-d)
		}
		q.Since = t.UTC().Format(time.RFC3339Nano)
	}
	out, done, err := do(c, func(ctx context.Context, api *apiclient.Client) (apiclient.CallPage, error) {
		return api.Calls(ctx, c.project, q)
	})
	if done {
		return err
	}
	rows := make([][]string, 0, len(out.Calls))
	for _, k := range out.Calls {
		outcome := k.Outcome
		if k.Code != 0 {
			outcome += " " + strconv.Itoa(k.Code)
		}
		rows = append(rows, []string{when(k.StartedAt), k.Server, kindOf(k), k.Tool, outcome, time.Duration(k.DurationMS * float64(time.Millisecond)).Round(time.Microsecond).String(), k.Session})
	}
	if err := c.table([]string{"STARTED", "SERVER", "KIND", "NAME", "OUTCOME", "DURATION", "SESSION"}, rows); err != nil {
		return err
	}
	if out.Next != "" {
		fmt.Fprintf(c.stderr, "more calls: add --cursor %s\n", out.Next)
	}
	return nil
}

// kindOf names what a logged call was: a tool call, a prompt get or a
// resource read (NAME is then the prompt's name or the URI).
func kindOf(k apiclient.Call) string {
	if k.Kind == "" {
		return "tool"
	}
	return k.Kind
}
