// Command mcpfixture serves the mcptest fixture over stdio (or streamable
// HTTP when MCPFIXTURE_HTTP names a listen address), built static into a
// FROM-scratch image by the hosted-server tests. Besides the fixture's
// tools it has the ones a container test needs:
//
//   - write_file {"path", "text"} / read_file {"path"}: a file, e.g. under a volume
//   - alloc {"mb"}: allocates and touches mb MiB and keeps them (OOM tests)
//   - stderr {"text"}: writes text and a newline to stderr
//   - exit {"code"}: exits the process with code at once
//   - seq {"i", "ms"}: records i, sleeping ms meanwhile; its result says
//     "interleaved" if another seq call ran at the same time
//   - order {}: the i values of the seq calls so far, in arrival order
//
// MCPFIXTURE_EXIT=<code> makes it print a line to stderr and exit with
// code at once, before serving; MCPFIXTURE_CRASH_FIRST=<n> does that
// (code 3) on its first n starts, counted in /data/starts.
//
//   - mute {}: answers, then stops writing anything to stdout (pings and
//     calls go unanswered) while still reading stdin
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-mcp/switchboard/internal/mcptest"
)

var schema = json.RawMessage(`{"type":"object"}`)

func main() {
	name := os.Getenv("MCPFIXTURE_NAME")
	if name == "" {
		name = "fixture"
	}
	s := mcptest.NewServer(mcptest.Options{Name: name})
	addTools(s)
	if addr := os.Getenv("MCPFIXTURE_HTTP"); addr != "" {
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
			&mcp.StreamableHTTPOptions{DisableLocalhostProtection: true})
		if err := http.ListenAndServe(addr, h); err != nil {
			fmt.Fprintln(os.Stderr, "mcpfixture:", err)
			os.Exit(1)
		}
		return
	}
	if n, _ := strconv.Atoi(os.Getenv("MCPFIXTURE_CRASH_FIRST")); n > 0 {
		// Crash the first n starts, counted in /data/starts (a volume).
		b, _ := os.ReadFile("/data/starts")
		starts, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		starts++
		_ = os.WriteFile("/data/starts", []byte(strconv.Itoa(starts)), 0o644)
		if starts <= n {
			fmt.Fprintln(os.Stderr, "mcpfixture: crashing on start", starts, "of", n)
			os.Exit(3)
		}
	}
	if code := os.Getenv("MCPFIXTURE_EXIT"); code != "" {
		// Crash at once, for restart and crash-loop tests.
		fmt.Fprintln(os.Stderr, "mcpfixture: exiting with code", code, "as asked")
		n, _ := strconv.Atoi(code)
		os.Exit(n)
	}
	fmt.Fprintln(os.Stderr, "mcpfixture: serving on stdio")
	out := &muteWriter{w: os.Stdout}
	mute = out
	err := s.Run(context.Background(), &mcp.IOTransport{Reader: os.Stdin, Writer: out})
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcpfixture:", err)
		os.Exit(1)
	}
}

// muteWriter stops writing after the write following arm().
type muteWriter struct {
	w            io.WriteCloser
	armed, muted atomic.Bool
}

func (m *muteWriter) Write(p []byte) (int, error) {
	if m.muted.Load() {
		return len(p), nil
	}
	n, err := m.w.Write(p)
	if m.armed.Load() {
		m.muted.Store(true)
	}
	return n, err
}

func (m *muteWriter) Close() error { return m.w.Close() }

var mute *muteWriter

type args struct {
	Path string `json:"path"`
	Text string `json:"text"`
	MB   int    `json:"mb"`
	Code int    `json:"code"`
	I    int    `json:"i"`
	MS   int    `json:"ms"`
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func fail(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

var (
	seqMu    sync.Mutex
	seqOrder []int
	inFlight atomic.Int32
	hog      [][]byte
)

func addTools(s *mcp.Server) {
	tool := func(name string, fn func(a args) *mcp.CallToolResult) {
		s.AddTool(&mcp.Tool{Name: name, InputSchema: schema}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a args
			if len(req.Params.Arguments) > 0 {
				if err := json.Unmarshal(req.Params.Arguments, &a); err != nil {
					return fail(err.Error()), nil
				}
			}
			return fn(a), nil
		})
	}
	tool("write_file", func(a args) *mcp.CallToolResult {
		if err := os.WriteFile(a.Path, []byte(a.Text), 0o644); err != nil {
			return fail(err.Error())
		}
		return text("ok")
	})
	tool("read_file", func(a args) *mcp.CallToolResult {
		b, err := os.ReadFile(a.Path)
		if err != nil {
			return fail(err.Error())
		}
		return text(string(b))
	})
	tool("alloc", func(a args) *mcp.CallToolResult {
		for range a.MB {
			b := make([]byte, 1<<20)
			for i := range b {
				b[i] = 1
			}
			hog = append(hog, b)
		}
		return text(fmt.Sprintf("holding %d MiB", len(hog)))
	})
	tool("stderr", func(a args) *mcp.CallToolResult {
		fmt.Fprintln(os.Stderr, a.Text)
		return text("ok")
	})
	tool("exit", func(a args) *mcp.CallToolResult {
		os.Exit(a.Code)
		return nil
	})
	tool("seq", func(a args) *mcp.CallToolResult {
		if inFlight.Add(1) > 1 {
			inFlight.Add(-1)
			return text("interleaved")
		}
		defer inFlight.Add(-1)
		seqMu.Lock()
		seqOrder = append(seqOrder, a.I)
		seqMu.Unlock()
		time.Sleep(time.Duration(a.MS) * time.Millisecond)
		return text(fmt.Sprint(a.I))
	})
	tool("order", func(args) *mcp.CallToolResult {
		seqMu.Lock()
		defer seqMu.Unlock()
		parts := make([]string, len(seqOrder))
		for i, v := range seqOrder {
			parts[i] = fmt.Sprint(v)
		}
		return text(strings.Join(parts, ","))
	})
	tool("mute", func(args) *mcp.CallToolResult {
		if mute != nil {
			mute.armed.Store(true)
		}
		return text("muting")
	})
}
