package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestDemoAnnotations: the demo tools are harmless and say so, so clients
// do not ask users to confirm an echo.
func TestDemoAnnotations(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- serveDemo(ctx, inR, outW); outW.Close() }()
	r := bufio.NewReader(outR)
	send := func(s string) {
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if _, err := r.ReadBytes('\n'); err != nil {
		t.Fatal(err)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	line, err := r.ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Result struct {
			Tools []struct {
				Name        string `json:"name"`
				Annotations struct {
					ReadOnly    *bool `json:"readOnlyHint"`
					Destructive *bool `json:"destructiveHint"`
					OpenWorld   *bool `json:"openWorldHint"`
				} `json:"annotations"`
			} `json:"tools"`
		} `json:"result"`
	}
	if err := json.Unmarshal(line, &res); err != nil {
		t.Fatalf("%v: %s", err, line)
	}
	got := map[string][3]bool{}
	for _, tl := range res.Result.Tools {
		a := tl.Annotations
		if a.ReadOnly == nil || a.Destructive == nil || a.OpenWorld == nil {
			t.Fatalf("tool %s lacks a hint: %s", tl.Name, line)
		}
		got[tl.Name] = [3]bool{*a.ReadOnly, *a.Destructive, *a.OpenWorld}
	}
	want := map[string][3]bool{"echo": {true, false, false}, "add": {true, false, false}, "time": {true, false, false}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("hints readOnly/destructive/openWorld (-want +got):\n%s", d)
	}
	inW.Close()
	cancel()
	<-done
}
