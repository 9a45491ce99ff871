package hosted

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
)

// parseCase is one case of a parser's table: the text, and the amount or
// the error it reads as.
type parseCase struct {
	in   switchboard.Quantity
	want int64
	err  error
}

func testParse(t *testing.T, fn string, parse func(switchboard.Quantity) (int64, error), cases map[string]parseCase) {
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parse(tc.in)
			if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
				t.Fatalf("%s(%q) error = %v, want %v", fn, tc.in, err, tc.err)
			}
			if got != tc.want {
				t.Errorf("%s(%q) = %d, want %d", fn, tc.in, got, tc.want)
			}
		})
	}
}

func TestParseCPU(t *testing.T) {
	testParse(t, "ParseCPU", ParseCPU, map[string]parseCase{
		"one":                {"1", 1e9, nil},
		"half":               {"0.5", 5e8, nil},
		"two and a quarter":  {"2.25", 2.25e9, nil},
		"leading dot":        {".5", 5e8, nil},
		"trailing dot":       {"2.", 2e9, nil},
		"spaces around":      {" 1 ", 1e9, nil},
		"smallest nano":      {"0.000000001", 1, nil},
		"zero":               {"0", 0, switchboard.ErrInvalid},
		"rounds to zero":     {"0.0000000001", 0, switchboard.ErrInvalid},
		"negative":           {"-1", 0, switchboard.ErrInvalid},
		"word":               {"abc", 0, switchboard.ErrInvalid},
		"empty":              {"", 0, switchboard.ErrInvalid},
		"with a unit":        {"1g", 0, switchboard.ErrInvalid},
		"millicores":         {"500m", 0, switchboard.ErrInvalid},
		"exponent":           {"1e3", 0, switchboard.ErrInvalid},
		"infinity":           {"Inf", 0, switchboard.ErrInvalid},
		"not a number":       {"NaN", 0, switchboard.ErrInvalid},
		"hex":                {"0x10", 0, switchboard.ErrInvalid},
		"JSON true":          {"true", 0, switchboard.ErrInvalid},
		"JSON object":        {`{"cores":1}`, 0, switchboard.ErrInvalid},
		"over int64 nanos":   {"9300000000", 0, switchboard.ErrInvalid},
		"beyond float range": {switchboard.Quantity(strings.Repeat("9", 400)), 0, switchboard.ErrInvalid},
	})
}

func TestParseSize(t *testing.T) {
	testParse(t, "ParseSize", ParseSize, map[string]parseCase{
		"bytes":                     {"1048576", 1 << 20, nil},
		"bytes with b":              {"10b", 10, nil},
		"M upper":                   {"512M", 512 << 20, nil},
		"m lower":                   {"512m", 512 << 20, nil},
		"Mi":                        {"512Mi", 512 << 20, nil},
		"G upper":                   {"1G", 1 << 30, nil},
		"GB":                        {"1GB", 1 << 30, nil},
		"GiB":                       {"1GiB", 1 << 30, nil},
		"gib lower":                 {"1gib", 1 << 30, nil},
		"fraction":                  {"1.5g", 3 << 29, nil},
		"k is 1024":                 {"2k", 2048, nil},
		"KiB":                       {"64KiB", 64 << 10, nil},
		"t":                         {"1t", 1 << 40, nil},
		"one space as docker":       {"1 g", 1 << 30, nil},
		"spaces around":             {" 256m ", 256 << 20, nil},
		"a million terabytes":       {"999999t", 999999 << 40, nil},
		"largest":                   {"9223372036854775807", 1<<63 - 1, nil},
		"empty":                     {"", 0, switchboard.ErrInvalid},
		"unit only":                 {"m", 0, switchboard.ErrInvalid},
		"negative":                  {"-1m", 0, switchboard.ErrInvalid},
		"negative bytes":            {"-1", 0, switchboard.ErrInvalid},
		"zero":                      {"0", 0, switchboard.ErrInvalid},
		"zero with a unit":          {"0g", 0, switchboard.ErrInvalid},
		"under a byte":              {"0.5b", 0, switchboard.ErrInvalid},
		"unknown unit":              {"1x", 0, switchboard.ErrInvalid},
		"peta":                      {"1p", 0, switchboard.ErrInvalid},
		"i without a unit":          {"1i", 0, switchboard.ErrInvalid},
		"exponent":                  {"1e9", 0, switchboard.ErrInvalid},
		"two dots":                  {"1.5.2g", 0, switchboard.ErrInvalid},
		"two spaces":                {"1  g", 0, switchboard.ErrInvalid},
		"infinity":                  {"Inf", 0, switchboard.ErrInvalid},
		"not a number":              {"NaN", 0, switchboard.ErrInvalid},
		"word":                      {"lots", 0, switchboard.ErrInvalid},
		"JSON true":                 {"true", 0, switchboard.ErrInvalid},
		"over int64 with unit":      {"9999999t", 0, switchboard.ErrInvalid},
		"over int64 bytes":          {"99999999999999999999", 0, switchboard.ErrInvalid},
		"fraction rounds over":      {"8388607.99999999999999999t", 0, switchboard.ErrInvalid},
		"fraction at the top fits":  {"8388607.5t", 8388607<<40 + 1<<39, nil},
		"fraction of bytes dropped": {"1.9", 1, nil},
	})
}

// TestLimitsFromJSON reads resource_limits as a client sends them, in the
// specification's string form and as numbers, and writes them back as
// they are stored.
func TestLimitsFromJSON(t *testing.T) {
	type want struct{ NanoCPUs, Memory, Disk int64 }
	for name, tc := range map[string]struct {
		limits string
		want   want
		stored string // resource_limits as the row keeps it
	}{
		"strings":              {`{"cpu": "1", "memory": "1G"}`, want{1e9, 1 << 30, DefaultDiskBytes}, `{"cpu":1,"memory":"1G"}`},
		"numbers":              {`{"cpu": 0.25, "memory": 536870912, "disk": 1073741824}`, want{2.5e8, 512 << 20, 1 << 30}, `{"cpu":0.25,"memory":536870912,"disk":1073741824}`},
		"as before":            {`{"cpu": 0.5, "memory": "256m", "disk": "2g"}`, want{5e8, 256 << 20, 2 << 30}, `{"cpu":0.5,"memory":"256m","disk":"2g"}`},
		"fractional string":    {`{"cpu": "2.25", "memory": "1.5g"}`, want{2.25e9, 3 << 29, DefaultDiskBytes}, `{"cpu":2.25,"memory":"1.5g"}`},
		"null is the default":  {`{"cpu": null, "memory": null}`, want{DefaultCPU * 1e9, DefaultMemoryBytes, DefaultDiskBytes}, `{}`},
		"empty is the default": {`{"cpu": "", "memory": ""}`, want{DefaultCPU * 1e9, DefaultMemoryBytes, DefaultDiskBytes}, `{}`},
		"absent":               {`{}`, want{DefaultCPU * 1e9, DefaultMemoryBytes, DefaultDiskBytes}, `{}`},
	} {
		t.Run(name, func(t *testing.T) {
			var reg switchboard.HostedRegistration
			if err := json.Unmarshal([]byte(`{"name": "n", "image": "img:1", "resource_limits": `+tc.limits+`}`), &reg); err != nil {
				t.Fatal(err)
			}
			p, err := newPlan(reg)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, want{p.nanoCPUs, p.memoryBytes, p.diskBytes}); diff != "" {
				t.Errorf("limits (-want +got):\n%s", diff)
			}
			stored, err := json.Marshal(p.reg.Limits)
			if err != nil {
				t.Fatal(err)
			}
			if string(stored) != tc.stored {
				t.Errorf("stored as %s, want %s", stored, tc.stored)
			}
			// A stored row reads back to the same plan.
			var back switchboard.HostedLimits
			if err := json.Unmarshal(stored, &back); err != nil {
				t.Fatal(err)
			}
			if back != p.reg.Limits {
				t.Errorf("read back %+v, want %+v", back, p.reg.Limits)
			}
		})
	}
}

// TestLimitsRefused: every wrong limit is ErrInvalid naming its field,
// whatever JSON value carried it.
func TestLimitsRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		limits, field string
	}{
		"cpu negative":      {`{"cpu": -1}`, "cpu"},
		"cpu zero":          {`{"cpu": 0}`, "cpu"},
		"cpu zero string":   {`{"cpu": "0"}`, "cpu"},
		"cpu below engine":  {`{"cpu": 0.001}`, "cpu"},
		"cpu word":          {`{"cpu": "one"}`, "cpu"},
		"cpu bool":          {`{"cpu": true}`, "cpu"},
		"cpu object":        {`{"cpu": {"cores": 1}}`, "cpu"},
		"cpu array":         {`{"cpu": [1]}`, "cpu"},
		"cpu exponent":      {`{"cpu": 1e300}`, "cpu"},
		"memory word":       {`{"memory": "lots"}`, "memory"},
		"memory below":      {`{"memory": "1k"}`, "memory"},
		"memory zero":       {`{"memory": 0}`, "memory"},
		"memory negative":   {`{"memory": -536870912}`, "memory"},
		"memory exponent":   {`{"memory": 5e8}`, "memory"},
		"memory overflow":   {`{"memory": "9999999t"}`, "memory"},
		"memory bool":       {`{"memory": false}`, "memory"},
		"disk word":         {`{"disk": "big"}`, "disk"},
		"disk below":        {`{"disk": "512k"}`, "disk"},
		"disk fraction neg": {`{"disk": "-0.5g"}`, "disk"},
	} {
		t.Run(name, func(t *testing.T) {
			var reg switchboard.HostedRegistration
			if err := json.Unmarshal([]byte(`{"name": "n", "image": "img:1", "resource_limits": `+tc.limits+`}`), &reg); err != nil {
				t.Fatal(err)
			}
			_, err := newPlan(reg)
			if !errors.Is(err, switchboard.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if msg := switchboard.Message(err); !strings.Contains(msg, "resource_limits."+tc.field+" ") || !strings.Contains(msg, "; write ") {
				t.Errorf("message %q does not name resource_limits.%s and what to write", msg, tc.field)
			}
		})
	}
}

func TestFitsHost(t *testing.T) {
	host := engine.Info{NCPU: 4, MemTotal: 8 << 30}
	for name, tc := range map[string]struct {
		limits switchboard.HostedLimits
		info   engine.Info
		field  string // "" when it fits
		figure string // the host's, in the message
	}{
		"within":               {switchboard.HostedLimits{CPU: "4", Memory: "8g"}, host, "", ""},
		"defaults":             {switchboard.HostedLimits{}, host, "", ""},
		"defaults, small host": {switchboard.HostedLimits{}, engine.Info{NCPU: 1, MemTotal: 256 << 20}, "", ""},
		"host not reported":    {switchboard.HostedLimits{CPU: "64", Memory: "999999t"}, engine.Info{}, "", ""},
		"cpu above":            {switchboard.HostedLimits{CPU: "4.5"}, host, "cpu", "4 CPUs"},
		"memory above":         {switchboard.HostedLimits{Memory: "999999t"}, host, "memory", "8 GiB"},
		"memory a byte over":   {switchboard.HostedLimits{Memory: "8589934593"}, host, "memory", "8 GiB"},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := newPlan(switchboard.HostedRegistration{Name: "n", Image: "img:1", Limits: tc.limits})
			if err != nil {
				t.Fatal(err)
			}
			err = p.fitsHost(tc.info)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("fitsHost = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, switchboard.ErrInvalid) {
				t.Fatalf("fitsHost = %v, want ErrInvalid", err)
			}
			if msg := switchboard.Message(err); !strings.Contains(msg, "resource_limits."+tc.field+" ") || !strings.Contains(msg, tc.figure) {
				t.Errorf("message %q does not name resource_limits.%s and the host's %s", msg, tc.field, tc.figure)
			}
		})
	}
}

func TestBytesText(t *testing.T) {
	for in, want := range map[int64]string{
		512: "512 bytes", 1 << 10: "1 KiB", 1536: "1.5 KiB", 512 << 20: "512 MiB",
		24_587_059_200: "22.9 GiB", 999999 << 40: "976.6 PiB", 1<<63 - 1: "8 EiB",
	} {
		if got := bytesText(in); got != want {
			t.Errorf("bytesText(%d) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[int64]string{24_587_059_200: "22g", 900 << 20: "900m", 4096: "4k", 100: "100"} {
		if got := sizeFloor(in); got != want {
			t.Errorf("sizeFloor(%d) = %q, want %q", in, got, want)
		}
	}
}

// FuzzLimits: the parsers never panic, refuse only with ErrInvalid and
// accept only amounts above 0; a Quantity survives its JSON round trip.
func FuzzLimits(f *testing.F) {
	for _, s := range []string{"1", "0.5", ".5", "1G", "512Mi", "1.5g", "999999t", "-1", "1e9", "Inf", "8388607.99999999999999999t", `{"a":1}`, ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := switchboard.Quantity(s)
		for name, parse := range map[string]func(switchboard.Quantity) (int64, error){"ParseCPU": ParseCPU, "ParseSize": ParseSize} {
			n, err := parse(q)
			if err != nil && !errors.Is(err, switchboard.ErrInvalid) {
				t.Errorf("%s(%q) = %v, not ErrInvalid", name, s, err)
			}
			if err == nil && n <= 0 {
				t.Errorf("%s(%q) = %d, want more than 0", name, s, n)
			}
		}
		if !utf8.ValidString(s) {
			return // JSON strings carry only valid UTF-8
		}
		b, err := json.Marshal(q)
		if err != nil {
			t.Fatal(err)
		}
		var back switchboard.Quantity
		if err := json.Unmarshal(b, &back); err != nil || back != q {
			t.Errorf("Quantity %q: JSON %s reads back as %q, %v", s, b, back, err)
		}
	})
}
