// Command clashserver is a test upstream written with the official go-sdk
// server API, to sit beside the go-sdk "everything" example behind the
// gateway: it offers a prompt named like everything's ("greet") and a
// resource with everything's URI ("embedded:info"), so the clash rules
// are tested, plus what everything lacks: resource subscriptions with
// notifications/resources/updated (tool "touch"), a prompt added at run
// time (tool "add_prompt", which sends prompts/list_changed), a resource
// added at run time ("add_resource", resources/list_changed), a sampling
// tool that names the client it was asked by ("ask"), a log message with
// the given text ("log"), a call that holds until it is cancelled, saying so in a
// log message ("hold") and one that exits the process ("crash"). Its lists come one
// item a page, so a reader must follow nextCursor.
//
// It serves stdio, or streamable HTTP with -http addr.
package main

import (
	"context"
	"flag"
	"log"
	"net/http"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

//lint:file-ignore SA1019 sampling is what this fixture exercises (deprecated by SEP-2577, still in use).

func main() {
	httpAddr := flag.String("http", "", "serve streamable HTTP at this address instead of stdio")
	announce := flag.Bool("announce-level", false, "after each logging/setLevel, log (warning) the level set: a message that belongs to no client's call")
	flag.Parse()
	s := mcp.NewServer(&mcp.Implementation{Name: "clash", Version: "1"}, &mcp.ServerOptions{
		// One item a page: every list the gateway reads is paginated.
		PageSize:           1,
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{"clash-" + req.Params.Argument.Value}}}, nil
		},
	})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Description: "the clashing greet"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "clash greet"}}}}, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "farewell", Arguments: []*mcp.PromptArgument{{Name: "name"}}}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "bye " + req.Params.Arguments["name"]}}}}, nil
	})
	read := func(text string) mcp.ResourceHandler {
		return func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: text}}}, nil
		}
	}
	s.AddResource(&mcp.Resource{Name: "info", URI: "embedded:info", MIMEType: "text/plain"}, read("clash info"))
	s.AddResource(&mcp.Resource{Name: "doc", URI: "clash:doc", MIMEType: "text/plain"}, read("clash doc"))
	s.AddResourceTemplate(&mcp.ResourceTemplate{Name: "item", URITemplate: "clash:item/{id}", MIMEType: "text/plain"}, read("clash item"))
	type uriArg struct {
		URI string `json:"uri"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "touch", Description: "send notifications/resources/updated for uri"},
		func(ctx context.Context, _ *mcp.CallToolRequest, a uriArg) (*mcp.CallToolResult, any, error) {
			if err := s.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: a.URI}); err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "touched"}}}, nil, nil
		})
	type nameArg struct {
		Name string `json:"name"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "add_prompt", Description: "add a prompt (prompts/list_changed)"},
		func(_ context.Context, _ *mcp.CallToolRequest, a nameArg) (*mcp.CallToolResult, any, error) {
			s.AddPrompt(&mcp.Prompt{Name: a.Name}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
				return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: a.Name}}}}, nil
			})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "added"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "ask", Description: "sampling/createMessage with the given text; returns the answer"},
		func(ctx context.Context, req *mcp.CallToolRequest, a nameArg) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10,
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: a.Name}}}})
			if err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{res.Content}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add_resource", Description: "add a resource (resources/list_changed)"},
		func(_ context.Context, _ *mcp.CallToolRequest, a uriArg) (*mcp.CallToolResult, any, error) {
			s.AddResource(&mcp.Resource{Name: a.URI, URI: a.URI, MIMEType: "text/plain"}, read(a.URI))
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "added"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "log", Description: "send notifications/message (level error) with the given text"},
		func(ctx context.Context, req *mcp.CallToolRequest, a nameArg) (*mcp.CallToolResult, any, error) {
			if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "error", Data: a.Name}); err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "logged"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "hold", Description: "log (info) that it holds, then return only when the call is cancelled"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: "holding"})
			<-ctx.Done()
			return nil, nil, ctx.Err()
		})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "exit the process"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			os.Exit(3)
			return nil, nil, nil
		})
	if *announce {
		s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				res, err := next(ctx, method, req)
				if p, ok := req.GetParams().(*mcp.SetLoggingLevelParams); ok && err == nil {
					_ = req.GetSession().(*mcp.ServerSession).Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Data: "level " + string(p.Level)})
				}
				return res, err
			}
		})
	}
	if *httpAddr != "" {
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
		log.Fatal(http.ListenAndServe(*httpAddr, h))
	}
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Print(err)
	}
}
