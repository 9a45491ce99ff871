package engine_test

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/quick"

	"github.com/switchboard-mcp/switchboard/engine"
)

// dockerName is what the engine accepts as a container or volume name.
var dockerName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]+$`)

// decodeName splits a name Name made (and did not shorten) back into its
// tag and parts: a name that decodes to its tuple could not have come
// from another.
func decodeName(name string) (tag string, parts []string, err error) {
	rest, ok := strings.CutPrefix(name, "switchboard-")
	if !ok {
		return "", nil, errors.New("no prefix")
	}
	tag, rest, hasParts := strings.Cut(rest, "-")
	if tag, err = unescape(tag); err != nil {
		return "", nil, err
	}
	if !hasParts {
		return tag, nil, nil
	}
	for _, p := range strings.Split(rest, ".") {
		s, err := unescape(p)
		if err != nil {
			return "", nil, err
		}
		parts = append(parts, s)
	}
	return tag, parts, nil
}

func unescape(s string) (string, error) {
	if s == "_" {
		return "", nil
	}
	var b []byte
	for i := 0; i < len(s); i++ {
		if s[i] != '_' {
			b = append(b, s[i])
			continue
		}
		if i+3 > len(s) {
			return "", fmt.Errorf("short escape in %q", s)
		}
		d, err := hex.DecodeString(s[i+1 : i+3])
		if err != nil || strings.ToLower(s[i+1:i+3]) != s[i+1:i+3] {
			return "", fmt.Errorf("bad escape in %q", s)
		}
		b = append(b, d[0])
		i += 2
	}
	return string(b), nil
}

// checkName fails t unless Name(tag, parts...) is a valid, bounded
// Docker name that decodes back to (tag, parts), or was shortened.
func checkName(t *testing.T, tag string, parts []string) string {
	t.Helper()
	n := engine.Name(tag, parts...)
	if !dockerName.MatchString(n) || len(n) > engine.MaxNameLen {
		t.Fatalf("Name(%q, %q) = %q: not a valid Docker name of at most %d bytes", tag, parts, n, engine.MaxNameLen)
	}
	if strings.Contains(n, "__") {
		return n // shortened: distinct by the hash of the whole name
	}
	gotTag, gotParts, err := decodeName(n)
	if err != nil || gotTag != tag || !slices.Equal(gotParts, parts) || (gotParts == nil) != (len(parts) == 0) {
		t.Fatalf("Name(%q, %q) = %q decodes to %q, %q, %v", tag, parts, n, gotTag, gotParts, err)
	}
	return n
}

// TestNameCollisions: the names that met under the old scheme differ,
// and a generated id's name is the one it always had.
func TestNameCollisions(t *testing.T) {
	pairs := [][2][]string{
		{{"catalog", "i", "x", "memory-data"}, {"catalog", "i", "x-memory", "data"}},
		{{"catalog", "i", "x.y", "z"}, {"catalog", "i", "x", "y.z"}},
		{{"mcp", "row", "/a/b"}, {"mcp", "row", "/a_b"}},
		{{"mcp", "row", "/a/b"}, {"mcp", "row", "a/b"}},
		{{"t"}, {"t", ""}},
		{{"t", ""}, {"t", "", ""}},
		{{"a-b", "c"}, {"a", "b-c"}},
		{{"a", "b_2d"}, {"a", "b-"}},
		{{"a", "B"}, {"a", "b"}},
		{{"a", strings.Repeat("p", 200)}, {"a", strings.Repeat("p", 201)}},
	}
	for _, p := range pairs {
		a, b := checkName(t, p[0][0], p[0][1:]), checkName(t, p[1][0], p[1][1:])
		if a == b {
			t.Errorf("%q and %q both name %q", p[0], p[1], a)
		}
	}
	for _, id := range []string{"0c1f9a52-6f3e-4b1a-9d2e-5c7b8a9f0e1d", "ws-0123456789abcdef"} {
		if got := engine.Name("ws", id); got != "switchboard-ws-"+id {
			t.Errorf("Name(ws, %s) = %q, want the name workspaces always had", id, got)
		}
	}
}

// TestNameInjective: over random tuples drawn from characters that
// collide under naive joining (separators, escapes, case, bytes above
// ASCII), long ones included, every name is valid and no two tuples share
// one.
func TestNameInjective(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 1))
	alphabet := []string{"a", "b", "A", "0", "-", ".", "_", "/", ":", " ", "_2d", "_2e", "é", "\x00", "\xff", "x-memory", "data"}
	word := func() string {
		var b strings.Builder
		n := r.IntN(6)
		if r.IntN(20) == 0 {
			n = 40 + r.IntN(60) // long enough to be shortened
		}
		for range n {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	seen := map[string]string{}
	for range 100000 {
		tag := []string{"catalog", "mcp", "ws", "sandbox", "a-b", "", "x_y"}[r.IntN(7)]
		parts := make([]string, r.IntN(5))
		for i := range parts {
			parts[i] = word()
		}
		n := checkName(t, tag, parts)
		key := fmt.Sprintf("%q %q", tag, parts)
		if prev, ok := seen[n]; ok && prev != key {
			t.Fatalf("%s and %s both name %q", prev, key, n)
		}
		seen[n] = key
	}
	// And testing/quick's own arbitrary strings.
	err := quick.Check(func(tag string, parts []string) bool {
		checkName(t, tag, parts)
		return true
	}, &quick.Config{MaxCount: 20000})
	if err != nil {
		t.Fatal(err)
	}
}
