package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/engine/enginetest"
)

var replicaSoak = flag.Duration("replica-soak", 0, "run TestReplicaSoak for this long (0: skipped); CI runs 60s")

// TestReplicaSoak: two replicas on one PostgreSQL share a hosted server
// while clients call it through both and, every few seconds, one replica
// is killed (-9) or stopped (SIGTERM) and started again, never both at
// once. It fails on an answered call that is not in the call log exactly
// once, an engine sample holding two running copies of the server (or of
// a sandbox session), or anything left running once both stop.
func TestReplicaSoak(t *testing.T) {
	if *replicaSoak <= 0 {
		t.Skip("set -replica-soak=60s to run it")
	}
	rs := newReplicaSet(t)
	image := enginetest.GoImage(t, enginetest.New(t), mcpFixturePkg)
	stopWatch := rs.watchDuplicates()
	var mu sync.Mutex
	dirs := []string{t.TempDir(), t.TempDir()}
	slots := []*binGateway{rs.startIn(dirs[0]), rs.startIn(dirs[1])}
	newAPI(t, slots[0].url, "").must(http.StatusCreated, "POST", "/api/v1/mcp/servers", map[string]any{
		"name": "notes", "image": image, "tool_prefix": "n_", "volumes": []string{"/data"}}, nil)
	for _, g := range slots {
		cs := sdkConnect(t, g.url+"/mcp", nil)
		waitListed(t, cs, "n_echo")
		_ = cs.Close()
	}
	live := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, g := range slots {
			if g != nil {
				out = append(out, g.url)
			}
		}
		return out
	}

	var answered sync.Map // marker -> true
	var calls, ok, failed atomic.Int64
	end := time.Now().Add(*replicaSoak)
	var wg sync.WaitGroup

	// One sandbox session, made on the first replica, used through both:
	// it follows its home's death, its file stays.
	scs := sdkConnect(t, slots[0].url+"/mcp", nil)
	sctx, scancel := context.WithTimeout(context.Background(), 2*time.Minute)
	res, err := scs.CallTool(sctx, &mcp.CallToolParams{Name: "execute_command", Arguments: map[string]any{"command": "echo soak > s.txt"}})
	scancel()
	if err != nil || res.IsError {
		t.Fatalf("execute_command: %v %+v", err, res)
	}
	sid, _ := structured(t, res)["session_id"].(string)
	_ = scs.Close()
	var sbxOK, sbxFailed atomic.Int64
	wg.Go(func() {
		for time.Now().Before(end) {
			urls := live()
			if len(urls) == 0 {
				time.Sleep(50 * time.Millisecond) // no replica up: nothing to poll for
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			cli := mcp.NewClient(&mcp.Implementation{Name: "soak-sbx", Version: "1"}, nil)
			cs, err := cli.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: urls[rand.IntN(len(urls))] + "/mcp", HTTPClient: &http.Client{}},
				&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
			if err == nil {
				var res *mcp.CallToolResult
				res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_command", Arguments: map[string]any{"command": "cat s.txt", "session_id": sid}})
				_ = cs.Close()
				if err == nil && (res.IsError || res.StructuredContent == nil) {
					err = fmt.Errorf("%+v", res)
				}
				if err == nil {
					if out := structured(t, res)["stdout"]; out != "soak\n" {
						t.Errorf("the sandbox session reads %q, want its file", out)
					}
				}
			}
			cancel()
			if err != nil {
				if sbxFailed.Add(1) <= 5 {
					t.Logf("sandbox call failed: %v", err)
				}
				continue
			}
			sbxOK.Add(1)
		}
	})
	for c := range 4 {
		wg.Go(func() {
			var cs *mcp.ClientSession
			defer func() {
				if cs != nil {
					_ = cs.Close()
				}
			}()
			for i := 0; time.Now().Before(end); i++ {
				if cs == nil {
					urls := live()
					if len(urls) == 0 {
						time.Sleep(50 * time.Millisecond) // no replica up: nothing to poll for
						continue
					}
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					cli := mcp.NewClient(&mcp.Implementation{Name: "soak", Version: "1"}, nil)
					s, err := cli.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: urls[rand.IntN(len(urls))] + "/mcp", HTTPClient: &http.Client{}},
						&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
					cancel()
					if err != nil {
						continue
					}
					cs = s
				}
				marker := fmt.Sprintf("c%d-%d", c, i)
				calls.Add(1)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "n_echo", Arguments: map[string]any{"text": marker}})
				cancel()
				if err != nil || res.IsError || len(res.Content) == 0 {
					failed.Add(1)
					_ = cs.Close()
					cs = nil // its replica may be gone: another session next
					continue
				}
				if tc, isText := res.Content[0].(*mcp.TextContent); !isText || tc.Text != marker {
					t.Errorf("call %s answered %+v", marker, res.Content[0])
					continue
				}
				ok.Add(1)
				answered.Store(marker, true)
			}
		})
	}

	// The chaos: every 3-6 s one replica goes (kill -9 or SIGTERM) and
	// comes back 1-2 s later.
	kills, terms := 0, 0
	for time.Now().Add(8 * time.Second).Before(end) {
		time.Sleep(time.Duration(3000+rand.IntN(3000)) * time.Millisecond) // the soak's pace, not a wait for a state
		i := rand.IntN(2)
		mu.Lock()
		g := slots[i]
		slots[i] = nil
		mu.Unlock()
		if rand.IntN(2) == 0 {
			g.kill(t)
			kills++
		} else {
			g.term()
			terms++
		}
		time.Sleep(time.Duration(1000+rand.IntN(1000)) * time.Millisecond)
		ng := rs.startIn(dirs[i]) // its spool is replayed
		mu.Lock()
		slots[i] = ng
		mu.Unlock()
	}
	wg.Wait()

	// Every answered call once in the call log.
	hist := newAPI(t, live()[0], "")
	eventually(t, opTimeout, func() (bool, string) {
		seen := map[string]int{}
		for q := "?tool=n_echo&limit=1000"; ; {
			page := hist.toolCalls("default", q)
			for _, call := range page.Calls {
				var args struct{ Text string }
				_ = json.Unmarshal(call.Arguments, &args)
				seen[args.Text]++
			}
			if page.Next == "" {
				break
			}
			q = "?tool=n_echo&limit=1000&cursor=" + url.QueryEscape(page.Next)
		}
		bad := ""
		answered.Range(func(k, _ any) bool {
			if n := seen[k.(string)]; n != 1 {
				bad = fmt.Sprintf("answered call %s is on record %d times", k, n)
				return false
			}
			return true
		})
		for m, n := range seen {
			if n > 1 {
				return false, fmt.Sprintf("call %s is on record %d times", m, n)
			}
		}
		return bad == "", bad
	})
	for _, g := range slots {
		g.term()
	}
	samples := stopWatch()
	if got := instanceContainers(t, rs.inst); len(got) != 0 {
		t.Errorf("%d containers left once both replicas stopped", len(got))
	}
	t.Logf("==== replica soak: %s, %d kill -9 and %d SIGTERM, %d hosted calls: %d answered (each on record once), %d failed; sandbox session calls: %d answered, %d failed; %d engine samples, none with two copies",
		*replicaSoak, kills, terms, calls.Load(), ok.Load(), failed.Load(), sbxOK.Load(), sbxFailed.Load(), samples)
	if sbxOK.Load() == 0 {
		t.Error("no sandbox call was answered")
	}
	if ok.Load() == 0 {
		t.Error("no call was answered")
	}
}
