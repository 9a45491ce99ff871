package config

import (
	"strings"
	"testing"
)

func FuzzExpand(f *testing.F) {
	for _, s := range []string{"${A}", "x${B:-d}y", "${", "$${A}", "${A:-${B}}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, missing := Expand(s, func(k string) string {
			if k == "A" {
				return "val"
			}
			return ""
		})
		if !strings.Contains(s, "${") && out != s {
			t.Fatalf("changed text without references: %q -> %q", s, out)
		}
		for _, m := range missing {
			if m == "A" {
				t.Fatalf("A reported missing in %q", s)
			}
		}
	})
}

func FuzzParseServers(f *testing.F) {
	f.Add([]byte(`{"mcpServers":{"a":{"command":"x","args":["${A}"]},"b":{"url":"http://h/sse"}}}`))
	f.Add([]byte(`{"servers":{"a":{"type":"http","url":"https://h"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		specs, err := ParseServers(data, func(string) string { return "" })
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, s := range specs {
			if seen[s.Name] || !validName.MatchString(s.Name) || s.Transport == "" {
				t.Fatalf("bad spec accepted: %+v", s)
			}
			seen[s.Name] = true
		}
	})
}

func FuzzOTLPHeaders(f *testing.F) {
	for _, s := range []string{"a=b", "Authorization=Bearer%20x,X-Org=a%2Cb", "=", ",,", "k=%zz", "k=v%0D%0A", "é=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := Config{OTLPHeaders: s}.OTLPHeaderMap()
		if err != nil {
			return
		}
		for k, v := range h {
			if !validHeaderName(k) || strings.ContainsAny(v, "\r\n\x00") {
				t.Fatalf("accepted header %q: %q from %q", k, v, s)
			}
		}
	})
}
