package hosted

import (
	"encoding/base64"
	"strings"
	"testing"
)

// A hosted server's stderr and log tails, and the messages that quote
// them, hide its environment's values also when encoded or cut by the
// start of the tail (issue 20, items 17 and 19).
func TestRedactEnv(t *testing.T) {
	const v = "p@ss/word-0123456789-abcdefghijklmnopqrstuvwxyz" // 46 bytes
	env := []string{"DB_PASSWORD=" + v, "SHORT=on"}
	tests := []struct{ name, in, want string }{
		{"as is", "password " + v + " rejected", "password [redacted] rejected"},
		{"percent-encoded", "dsn=postgres://u:p%40ss%2fword-0123456789-abcdefghijklmnopqrstuvwxyz@db", "dsn=postgres://u:[redacted]@db"},
		{"JSON-escaped", `{"password":"p@ss\/word-0123456789-abcdefghijklmnopqrstuvwxyz"}`, `{"password":"[redacted]"}`},
		{"base64", "auth " + base64.StdEncoding.EncodeToString([]byte(v)) + " bad", "auth [redacted] bad"},
		{"cut by the tail's start", v[17:] + "\nnext", "[redacted]\nnext"},
		{"short values stay", "SHORT is on", "SHORT is on"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := RedactEnv(tt.in, env, nil)
			if got != tt.want {
				t.Errorf("RedactEnv(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if strings.Contains(got, v[20:]) {
				t.Errorf("RedactEnv(%q) shows a piece of the value: %q", tt.in, got)
			}
		})
	}
}

// A hosted server's command line is redacted of its credentials where
// its stderr shows it, as its config is masked (issue 34, item 7).
func TestRedactEnvArgs(t *testing.T) {
	argv := []string{"/srv", "--api-key=cmdkey-4tr8x", "--password", "flagpw-1qa5y", "--db", "postgres://app:dsnpw-7ws3z@db/app", "--verbose", "${TOKEN}"}
	in := "usage: /srv --api-key=cmdkey-4tr8x --password flagpw-1qa5y --db postgres://app:dsnpw-7ws3z@db/app --verbose ${TOKEN}"
	want := "usage: /srv --api-key=[redacted] --password [redacted] --db postgres://app:[redacted]@db/app --verbose ${TOKEN}"
	if got := RedactEnv(in, nil, argv); got != want {
		t.Errorf("RedactEnv(%q) = %q, want %q", in, got, want)
	}
}
