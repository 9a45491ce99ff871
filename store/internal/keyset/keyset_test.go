package keyset

import (
	"errors"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

func TestRoundTrip(t *testing.T) {
	for _, c := range []Cursor{
		{At: time.Date(2026, 1, 2, 3, 4, 5, 678901000, time.UTC), ID: 42},
		{At: time.Unix(0, 0).UTC(), ID: 0},
		{At: time.Date(1969, 12, 31, 23, 59, 59, 999999000, time.UTC), ID: 1<<63 - 1},
	} {
		got, err := Parse(c.String())
		if err != nil || !got.At.Equal(c.At) || got.At.Location() != time.UTC || got.ID != c.ID {
			t.Errorf("Parse(%v.String()) = %v, %v", c, got, err)
		}
	}
}

func TestParseMalformed(t *testing.T) {
	for _, s := range []string{"", "x", "not base64!", "AAAA", Cursor{}.String() + "AA", Cursor{}.String() + "="} {
		if _, err := Parse(s); !errors.Is(err, switchboard.ErrInvalid) {
			t.Errorf("Parse(%q) = %v, want ErrInvalid", s, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(Cursor{At: time.Now(), ID: 7}.String())
	f.Add("garbage")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := Parse(s)
		if err != nil {
			if !errors.Is(err, switchboard.ErrInvalid) {
				t.Fatalf("Parse(%q): %v is not ErrInvalid", s, err)
			}
			return
		}
		if again, err := Parse(c.String()); err != nil || again != c {
			t.Fatalf("Parse(%q) = %v; its String does not parse back: %v, %v", s, c, again, err)
		}
	})
}
