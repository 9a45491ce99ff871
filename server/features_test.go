package server

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard"
)

// TestToolsListPages: a catalog longer than a page comes in pages whose
// nextCursor leads to the next, every tool once, in order; a cursor the
// gateway did not make is invalid params.
func TestToolsListPages(t *testing.T) {
	var tools []switchboard.Tool
	var want []string
	for i := range 5 {
		n := "t" + strconv.Itoa(i)
		tools = append(tools, switchboard.Tool{Name: n, Raw: json.RawMessage(`{"name":"` + n + `"}`)})
		want = append(want, n)
	}
	s := New(fakeGateway{cat: switchboard.NewCatalog(1, tools)}, Options{ListPageSize: 2})
	defer s.Shutdown(context.Background())
	var got []string
	params := json.RawMessage(`{}`)
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("pages never end")
		}
		res, rpc := s.dispatchResult(context.Background(), "", &rpcMessage{Method: "tools/list", Params: params}, nil)
		if rpc != nil {
			t.Fatal(rpc)
		}
		var page struct {
			Tools      []struct{ Name string }
			NextCursor string
		}
		if err := json.Unmarshal(res, &page); err != nil {
			t.Fatalf("%s: %v", res, err)
		}
		for _, tl := range page.Tools {
			got = append(got, tl.Name)
		}
		if page.NextCursor == "" {
			break
		}
		params = mustJSON(map[string]string{"cursor": page.NextCursor})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tools over pages (-want +got):\n%s", diff)
	}
	_, rpc := s.dispatchResult(context.Background(), "", &rpcMessage{Method: "tools/list", Params: json.RawMessage(`{"cursor":"bogus"}`)}, nil)
	if rpc == nil || rpc.Code != switchboard.CodeInvalidParams {
		t.Errorf("a foreign cursor: %v, want -32602", rpc)
	}
}

// blockingFeatures serves feature requests only when their ctx ends.
type blockingFeatures struct {
	fakeGateway
	started chan struct{}
}

func (b blockingFeatures) Feature(ctx context.Context, _ switchboard.FeatureRequest) (json.RawMessage, error) {
	close(b.started)
	<-ctx.Done()
	return nil, switchboard.Errorf(switchboard.ErrCanceled, "cancelled")
}

func (blockingFeatures) SetLogLevel(context.Context, string) {}

// TestFeatureRequestCancelled: notifications/cancelled cancels a
// session's prompts/get like a tools/call, and the request gets no
// answer.
func TestFeatureRequestCancelled(t *testing.T) {
	gw := blockingFeatures{fakeGateway{cat: switchboard.NewCatalog(1, nil)}, make(chan struct{})}
	s := New(gw, Options{})
	defer s.Shutdown(context.Background())
	done := make(chan []byte, 1)
	go func() {
		done <- s.dispatch(context.Background(), "s1", &rpcMessage{ID: json.RawMessage(`7`), Method: "prompts/get", Params: json.RawMessage(`{"name":"p"}`)}, nil)
	}()
	<-gw.started
	s.cancelled("s2", &rpcMessage{Method: "notifications/cancelled", Params: json.RawMessage(`{"requestId":7}`)}) // another session's: no effect
	select {
	case resp := <-done:
		t.Fatalf("another session's cancellation ended the request: %s", resp)
	default:
	}
	s.cancelled("s1", &rpcMessage{Method: "notifications/cancelled", Params: json.RawMessage(`{"requestId":7}`)})
	if resp := <-done; resp != nil {
		t.Errorf("a cancelled request was answered: %s", resp)
	}
}

// TestClientCapsCheck: a request back is checked against the client's
// declaration, elicitation by mode: an empty elicitation object is form
// mode only; a mode the client did not declare is ErrInvalid (-32602),
// a capability it did not declare ErrNotFound.
func TestClientCapsCheck(t *testing.T) {
	const url, form, noMode = `{"mode":"url","url":"https://x","elicitationId":"1","message":"m"}`, `{"mode":"form","message":"m"}`, `{"message":"m"}`
	for _, tc := range []struct {
		caps, method, params string
		want                 error
	}{
		{`{"elicitation":{}}`, "elicitation/create", noMode, nil},
		{`{"elicitation":{}}`, "elicitation/create", form, nil},
		{`{"elicitation":{}}`, "elicitation/create", url, switchboard.ErrInvalid},
		{`{"elicitation":{"form":{}}}`, "elicitation/create", url, switchboard.ErrInvalid},
		{`{"elicitation":{"url":{}}}`, "elicitation/create", url, nil},
		{`{"elicitation":{"url":{}}}`, "elicitation/create", noMode, switchboard.ErrInvalid},
		{`{"elicitation":{"form":{},"url":{}}}`, "elicitation/create", url, nil},
		{`{"elicitation":{"form":{}}}`, "elicitation/create", `{"mode":"other"}`, switchboard.ErrInvalid},
		{`{"sampling":{}}`, "elicitation/create", form, switchboard.ErrNotFound},
		{`{"elicitation":null}`, "elicitation/create", form, switchboard.ErrNotFound},
		{`{"sampling":{}}`, "sampling/createMessage", `{}`, nil},
		{`{"elicitation":{}}`, "roots/list", `{}`, switchboard.ErrNotFound},
	} {
		caps := parseClientCaps(json.RawMessage(`{"capabilities":` + tc.caps + `}`))
		err := caps.check(tc.method, json.RawMessage(tc.params))
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s, %s %s: %v, want %v", tc.caps, tc.method, tc.params, err, tc.want)
		}
	}
}

// TestRequestBackIsBounded: a request back to a client that never
// answers ends with ErrTimeout when the call it belongs to runs out of
// time (ctx), on a session's stream and in 2026-07-28 rounds (a round the
// client never comes back for, and an input request it never answers),
// and a late answer then finds nothing waiting.
func TestRequestBackIsBounded(t *testing.T) {
	s := &Server{}
	sent := make(chan []byte, 1)
	taken := make(chan *ask, 1)
	cases := map[string]switchboard.ClientPeer{
		"session":           &peer{s: s, session: "s1", caps: clientCaps{sampling: true}, send: func(b []byte) bool { sent <- b; return true }},
		"round never taken": &roundPeer{s: s, call: &roundCall{asks: make(chan *ask)}, caps: clientCaps{sampling: true}},
		"round never answered": func() switchboard.ClientPeer {
			asks := make(chan *ask)
			go func() { taken <- <-asks }()
			return &roundPeer{s: s, call: &roundCall{asks: asks}, caps: clientCaps{sampling: true}}
		}(),
	}
	for name, p := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			errc := make(chan error, 1)
			go func() {
				_, err := p.Request(ctx, "sampling/createMessage", json.RawMessage(`{}`))
				errc <- err
			}()
			select {
			case err := <-errc:
				if !errors.Is(err, switchboard.ErrTimeout) {
					t.Errorf("err %v, want ErrTimeout", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the request back outlived its call's deadline")
			}
		})
	}
	var msg struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(<-sent, &msg); err != nil {
		t.Fatal(err)
	}
	if s.out.resolve("s1", &rpcMessage{ID: msg.ID, Result: json.RawMessage(`{}`)}) {
		t.Error("a late answer found the request still waiting")
	}
	<-taken
}
