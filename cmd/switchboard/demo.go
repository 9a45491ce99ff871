package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// harmless annotates the demo tools truthfully: they read nothing but
// their arguments (and the clock), change nothing and reach nothing
// outside the process, so clients need not ask the user to confirm them.
// mcp-go's NewTool defaults to the opposite hints.
func harmless(title string, idempotent bool) []mcp.ToolOption {
	return []mcp.ToolOption{mcp.WithTitleAnnotation(title), mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithDestructiveHintAnnotation(false), mcp.WithIdempotentHintAnnotation(idempotent),
		mcp.WithOpenWorldHintAnnotation(false)}
}

// serveDemo runs the built-in demo MCP server on stdio. The gateway starts
// it as an ordinary stdio upstream when no servers file is configured, so
// a first run has real tools to list and call.
func serveDemo(ctx context.Context, in io.Reader, out io.Writer) error {
	s := server.NewMCPServer("switchboard-demo", version, server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("echo", append(harmless("Echo", true),
		mcp.WithDescription("Returns the text it is given."),
		mcp.WithString("text", mcp.Required(), mcp.Description("Text to echo back")))...),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			text, err := req.RequireString("text")
			if err != nil {
				return mcp.NewToolResultError(err.Error()), nil
			}
			return mcp.NewToolResultText(text), nil
		})
	s.AddTool(mcp.NewTool("add", append(harmless("Add", true),
		mcp.WithDescription("Adds two numbers."),
		mcp.WithNumber("a", mcp.Required()), mcp.WithNumber("b", mcp.Required()))...),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			a, err1 := req.RequireFloat("a")
			b, err2 := req.RequireFloat("b")
			if err1 != nil || err2 != nil {
				return mcp.NewToolResultError("a and b must be numbers"), nil
			}
			return mcp.NewToolResultText(fmt.Sprint(a + b)), nil
		})
	s.AddTool(mcp.NewTool("time", append(harmless("Current time", false),
		mcp.WithDescription("Returns the current time in RFC 3339, in UTC or the given IANA zone."),
		mcp.WithString("zone", mcp.Description("IANA time zone such as Europe/Paris")))...),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			loc := time.UTC
			if z := strings.TrimSpace(req.GetString("zone", "")); z != "" {
				l, err := time.LoadLocation(z)
				if err != nil {
					return mcp.NewToolResultError("unknown time zone " + z), nil
				}
				loc = l
			}
			return mcp.NewToolResultText(time.Now().In(loc).Format(time.RFC3339)), nil
		})
	err := server.NewStdioServer(s).Listen(ctx, in, out)
	if err != nil && ctx.Err() == nil && err != io.EOF {
		return err
	}
	return nil
}
