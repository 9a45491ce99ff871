// Calls to an upstream: tools/call with its _meta and progress
// forwarding, the call timeout, the hosted FIFO turn and the mapping of a
// request's error to a domain error.

package upstreams

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

type progressSink struct {
	token json.RawMessage // the downstream client's token
	// ch hands notifications to a per-call goroutine so a client that
	// stops reading can never stall the upstream's shared reader. When it
	// is full, progress is dropped: it is advisory.
	ch chan json.RawMessage
}

// callTool forwards tools/call. args and meta are the client's raw JSON;
// a progress token in meta is replaced by one unique to this connection
// so progress from a shared upstream reaches the right client.
func (u *upstream) callTool(ctx context.Context, name string, args, meta json.RawMessage, onProgress func(json.RawMessage), from origin) (json.RawMessage, error) {
	// Built by hand to keep the client's argument bytes and key order;
	// compacting also guarantees no newline reaches a stdio frame.
	head := make([]byte, 0, len(args)+len(name)+64)
	head = append(head, `{"name":`...)
	head = append(head, mustJSON(name)...)
	if len(args) > 0 {
		head = append(head, `,"arguments":`...)
		var buf bytes.Buffer
		if err := json.Compact(&buf, args); err != nil {
			return nil, switchboard.Errorf(switchboard.ErrInvalid, "arguments are not valid JSON")
		}
		head = append(head, buf.Bytes()...)
	}
	// A stdio upstream has no headers: the trace context travels in
	// _meta (traceparent, tracestate), the keys MCP reserves for it
	// (SEP-414). Only keys the client did not set are added, so the
	// client's own _meta is forwarded as before; with tracing off there
	// are none and nothing changes.
	var tc map[string]string
	if u.spec.Transport == switchboard.TransportStdio || u.spec.Transport == switchboard.TransportHosted {
		tc = traceMeta(ctx)
	}
	// mm is the _meta to forward (if send), without the client's
	// protocol keys: they describe the client's hop, not ours.
	var mm map[string]json.RawMessage
	send := len(meta) > 0 || len(tc) > 0
	if send {
		mm = map[string]json.RawMessage{}
		if len(meta) > 0 {
			if err := json.Unmarshal(meta, &mm); err != nil {
				return nil, switchboard.Errorf(switchboard.ErrInvalid, "params._meta must be an object")
			}
		}
		if mm == nil && len(tc) > 0 {
			mm = map[string]json.RawMessage{} // _meta was null
		}
		dropped := dropProtocolMeta(mm)
		for k, v := range tc {
			if _, set := mm[k]; !set {
				mm[k] = mustJSON(v)
			}
		}
		if tok, ok := mm["progressToken"]; ok && onProgress != nil {
			ours := u.spec.Name + "-p" + strconv.FormatInt(u.progressSeq.Add(1), 10)
			defer u.relayProgress(ours, tok, onProgress)()
			mm["progressToken"] = mustJSON(ours)
		}
		if len(mm) == 0 && dropped > 0 {
			// A _meta of nothing but protocol keys is not forwarded at
			// all: the upstream sees what a 2025 client's call sends.
			send = false
		}
	}
	return u.exchange(ctx, "tool", name, "tools/call", from, func(c conn) any {
		p := callParams(head, mm, send, c)
		// A second rendering (after a lost session) must not write over
		// the bytes of the first.
		head = slices.Clip(head)
		return p
	})
}

// relayProgress registers a sink for the upstream's progress on token
// ours and relays it, in order, to onProgress as the client's token; the
// returned func unregisters it after relaying what arrived before the
// result.
func (u *upstream) relayProgress(ours string, tok json.RawMessage, onProgress func(json.RawMessage)) (done func()) {
	sink := &progressSink{token: tok, ch: make(chan json.RawMessage, 32)}
	u.progress.Store(ours, sink)
	stop := make(chan struct{})
	var fwd sync.WaitGroup
	fwd.Go(func() {
		for {
			select {
			case p := <-sink.ch:
				onProgress(p)
			case <-stop:
				// Progress that arrived before the result goes out
				// before it.
				for {
					select {
					case p := <-sink.ch:
						onProgress(p)
					default:
						return
					}
				}
			}
		}
	})
	return func() {
		u.progress.Delete(ours)
		close(stop)
		fwd.Wait()
	}
}

// exchange sends one client request (tools/call or any other method) to
// u and returns its result: within the server's call timeout, in turn on
// a hosted server, over a connection made now if there is none, with
// the client tracked for the requests the server makes back. kind and
// name describe the request in errors ("tool" and the tool, or "method"
// and the method); params renders the request's params for a connection
// (a 2026-07-28 one carries the hop's protocol keys).
func (u *upstream) exchange(ctx context.Context, kind, name, method string, from origin, params func(conn) any) (json.RawMessage, error) {
	timeout := u.callTimeout()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !u.enter() {
		return nil, u.errRemoved()
	}
	defer u.leave()
	if err := u.takeTurn(ctx); err != nil {
		return nil, u.callErr(ctx, kind, name, timeout, err)
	}
	defer u.endTurn()
	c, err := u.ensure(ctx)
	if err != nil {
		return nil, u.callErr(ctx, kind, name, timeout, err)
	}
	ctx, untrack := u.track(ctx, from)
	defer untrack()
	res, err := c.call(ctx, method, params(c))
	if errors.Is(err, errSessionLost) {
		// A streamable server that restarted forgot our session and never
		// ran the request: re-initialize (through the breaker) and send it
		// again. Once only, so a server that forgets every session cannot
		// keep the caller looping. The new connection may speak another
		// revision: the params are rendered for it.
		u.log.Info("upstream forgot the session; re-initializing and sending the request again", kind, name)
		if c, err = u.ensure(ctx); err == nil {
			res, err = c.call(ctx, method, params(c))
		}
	}
	if err == nil && isStateless(c) {
		res, err = stripHopResult(res)
	}
	if err != nil {
		return nil, u.callErr(ctx, kind, name, timeout, err)
	}
	return res, nil
}

// callParams finishes the params of a tools/call: head (name and
// arguments, without the closing brace) and the _meta to forward (none
// unless send; as the client sent it otherwise, even empty or
// null). On a 2026-07-28 connection the hop's protocol keys lead the
// _meta.
func callParams(head []byte, mm map[string]json.RawMessage, send bool, c conn) any {
	p := head
	if !isStateless(c) {
		if send {
			p = append(p, `,"_meta":`...)
			p = append(p, mustJSON(mm)...)
		}
		return json.RawMessage(append(p, '}'))
	}
	p = append(p, `,"_meta":{`...)
	p = append(p, c.(revisioner).protocolMeta()...)
	if len(mm) > 0 {
		b := mustJSON(mm)
		p = append(append(p, ','), b[1:len(b)-1]...)
	}
	return hopParams(append(p, "}}"...))
}

// callTimeout is the server's own call timeout, or the gateway's.
func (u *upstream) callTimeout() time.Duration {
	if u.spec.CallTimeout > 0 {
		return u.spec.CallTimeout
	}
	return u.m.opts.CallTimeout
}

// takeTurn waits, on a hosted server, until every request that arrived
// earlier has had its answer, timed out or been cancelled; a caller whose
// ctx ends while waiting leaves the line without writing. Other
// transports take requests concurrently. Call endTurn after a nil error.
func (u *upstream) takeTurn(ctx context.Context) error {
	if u.queue == nil {
		return nil
	}
	return u.queue.acquire(ctx)
}

func (u *upstream) endTurn() {
	if u.queue != nil {
		u.queue.release()
	}
}

// callErr maps the error of a request (kind "tool" for tools/call, where
// name is the tool; "method" for any other, where name is the method) to
// a domain error a client may see.
func (u *upstream) callErr(ctx context.Context, kind, name string, timeout time.Duration, err error) error {
	var rpc *switchboard.RPCError
	switch {
	case errors.As(err, &rpc):
		return err
	case (errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded)) && timeout <= 0:
		return switchboard.Errorf(switchboard.ErrTimeout, "server %q: %s %q did not answer before the deadline", u.spec.Name, kind, name)
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		return switchboard.Errorf(switchboard.ErrTimeout, "server %q: %s %q did not answer within %s", u.spec.Name, kind, name, timeout)
	case errors.Is(err, context.Canceled) && kind == "tool":
		return switchboard.Errorf(switchboard.ErrCanceled, "call to %q cancelled", name)
	case errors.Is(err, context.Canceled):
		return switchboard.Errorf(switchboard.ErrCanceled, "%s %q cancelled", kind, name)
	case errors.Is(err, errConnLost):
		u.mu.Lock()
		if u.conn != nil {
			select {
			case <-u.conn.done():
				u.lostLocked()
			default:
			}
		}
		msg := u.lastErr
		u.mu.Unlock()
		if msg == "" {
			msg = "connection lost; it is re-established on next use"
		}
		return switchboard.Errorf(switchboard.ErrUnavailable, "server %q: %s", u.spec.Name, msg)
	}
	var de *switchboard.Error
	if errors.As(err, &de) {
		return err
	}
	return switchboard.Errorf(switchboard.ErrUnavailable, "server %q: %s", u.spec.Name, switchboard.Message(err))
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only called with values that always marshal
	}
	return b
}
