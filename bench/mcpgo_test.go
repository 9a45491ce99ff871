package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// The light-client benchmark's echo server is an mcp-go server, as in the
// measurement issue 11 reports: it is the cheaper of the two SDKs per
// call, so the gateway in front of it is not starved of CPU by its own
// upstream on two cores. This binary serves it when started with
// envMCPGoChild: "stdio" (a gateway upstream) or "http" (streamable HTTP
// on 127.0.0.1:0, its address printed on stdout, until stdin ends).
const envMCPGoChild = "SWITCHBOARD_BENCH_MCPGO"

// mcpgoEcho is the mcp-go server: echo, and pid (its process id, so the
// benchmark can read the upstream's CPU).
func mcpgoEcho() *server.MCPServer {
	s := server.NewMCPServer("bench-echo", "1", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("echo", mcp.WithDescription("Returns the text it is given."),
		mcp.WithString("text", mcp.Required())),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			text, err := req.RequireString("text")
			if err != nil {
				return mcp.NewToolResultError(err.Error()), nil
			}
			return mcp.NewToolResultText(text), nil
		})
	s.AddTool(mcp.NewTool("pid", mcp.WithDescription("Returns the server's process id.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(strconv.Itoa(os.Getpid())), nil
		})
	return s
}

// runIfMCPGoChild serves mcpgoEcho when this binary was started for it.
func runIfMCPGoChild() {
	mode := os.Getenv(envMCPGoChild)
	if mode == "" {
		return
	}
	s := mcpgoEcho()
	switch mode {
	case "stdio":
		if err := server.NewStdioServer(s).Listen(context.Background(), os.Stdin, os.Stdout); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	case "http":
		serveChild("bench mcp-go echo", server.NewStreamableHTTPServer(s))
	}
	fmt.Fprintf(os.Stderr, "bench mcp-go echo: unknown mode %q\n", mode)
	os.Exit(1)
}

// writeMCPGoServers writes a servers file with one stdio upstream,
// "echo": this binary as the mcp-go echo server.
func writeMCPGoServers(dir string) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	doc := map[string]any{"mcpServers": map[string]any{"echo": map[string]any{
		"command": exe, "env": map[string]string{envMCPGoChild: "stdio"}}}}
	b, err := json.Marshal(doc)
	if err != nil {
		return "", err
	}
	file := filepath.Join(dir, "servers.json")
	return file, os.WriteFile(file, b, 0o600)
}
