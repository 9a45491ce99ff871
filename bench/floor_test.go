package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sync"
)

// The floor targets calibrate the light-client figures: what any server
// built on net/http costs per call on this machine before it does any MCP
// work, measured by the same client in the same run.
//
//   - "floor-http" answers every POST with fixed bytes: the cost of
//     net/http and loopback TCP alone.
//   - "floor-proxy" writes each request as one line to a child process
//     that echoes lines back (a pipe round trip, as to a stdio upstream),
//     and answers with the echoed line: the least a stdio proxy does, with
//     no JSON decoding, no routing, no call log and no metrics.
//
// Neither is MCP: they answer initialize with a session id and any other
// request with bytes that pass the light client's check (its own echo call
// contains "hello").
const (
	envFloorChild    = "SWITCHBOARD_BENCH_FLOOR"     // "http" or "proxy"
	envLineEchoChild = "SWITCHBOARD_BENCH_LINE_ECHO" // "1": copy stdin to stdout
	lightFloorHTTP   = "floor-http"
	lightFloorProxy  = "floor-proxy"
)

// runIfFloorChild serves a floor target when this binary was started for
// one: it prints its address on stdout and serves until stdin ends.
func runIfFloorChild() {
	if os.Getenv(envLineEchoChild) == "1" {
		_, _ = io.Copy(os.Stdout, os.Stdin)
		os.Exit(0)
	}
	mode := os.Getenv(envFloorChild)
	if mode == "" {
		return
	}
	var answer func(body []byte) []byte
	switch mode {
	case "http":
		fixed := []byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hello"}]}}`)
		answer = func([]byte) []byte { return fixed }
	case "proxy":
		p, err := startLineEcho()
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench floor:", err)
			os.Exit(1)
		}
		answer = p.roundTrip
	default:
		fmt.Fprintf(os.Stderr, "bench floor: unknown mode %q\n", mode)
		os.Exit(1)
	}
	initialized := []byte(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"` + protocolVersion + `","capabilities":{"tools":{}},"serverInfo":{"name":"floor","version":"1"}}}`)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		switch {
		case bytes.Contains(body, []byte(`"initialize"`)):
			w.Header().Set("Mcp-Session-Id", "floor")
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(initialized)
		case !bytes.Contains(body, []byte(`"id"`)):
			w.WriteHeader(http.StatusAccepted)
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(answer(body))
		}
	})
	serveChild("bench floor", h)
}

// lineEcho is a child that echoes lines; calls are matched to answers in
// order, which the child keeps.
type lineEcho struct {
	mu      sync.Mutex
	w       *bufio.Writer
	waiting chan chan []byte
}

func startLineEcho() (*lineEcho, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envLineEchoChild+"=1", envFloorChild+"=")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &lineEcho{w: bufio.NewWriter(in), waiting: make(chan chan []byte, 1024)}
	go func() {
		br := bufio.NewReaderSize(out, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				os.Exit(1)
			}
			(<-p.waiting) <- line
		}
	}()
	return p, nil
}

// roundTrip sends body as one line and returns the line that comes back.
func (p *lineEcho) roundTrip(body []byte) []byte {
	ch := make(chan []byte, 1)
	p.mu.Lock()
	p.waiting <- ch
	_, _ = p.w.Write(bytes.TrimSpace(body))
	_ = p.w.WriteByte('\n')
	_ = p.w.Flush()
	p.mu.Unlock()
	return <-ch
}
