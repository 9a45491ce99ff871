package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

// MaxCallTimeout bounds a server's callTimeout, as hosted servers'
// call_timeout is bounded: a call that may run for days holds a session
// slot and, on stdio, every call queued behind it.
const MaxCallTimeout = time.Hour

// maxServersFile bounds what ReadServersFile accepts; a servers file is a few KB.
const maxServersFile = 4 << 20

// fileServer is one entry of the servers file as users write it for Claude
// Desktop, Cursor (command/args/env, url/headers) and VS Code (type).
type fileServer struct {
	Command     string            `json:"command"`
	Args        []string          `json:"args"`
	Env         map[string]string `json:"env"`
	Cwd         string            `json:"cwd"`
	URL         string            `json:"url"`
	Headers     map[string]string `json:"headers"`
	Transport   string            `json:"transport"`
	Type        string            `json:"type"`
	ToolPrefix  string            `json:"toolPrefix"`
	CallTimeout string            `json:"callTimeout"`
	Disabled    bool              `json:"disabled"`
	// Hosted makes the entry a container the gateway runs (ParseHosted);
	// ParseServers skips it.
	Hosted json.RawMessage `json:"hosted"`
}

var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// ServersFile is what a servers file configures: the servers the gateway
// connects to (ParseServers) and those it runs in containers
// (ParseHosted), from one read of the file.
type ServersFile struct {
	Specs  []switchboard.ServerSpec
	Hosted []switchboard.HostedRegistration
}

// ReadServersFile reads the servers file at path once and parses both
// kinds of entry; the problems of both are returned together.
func ReadServersFile(path string, getenv func(string) string) (ServersFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return ServersFile{}, fmt.Errorf("MCP_SERVER_CONFIG: %w", err)
	}
	defer f.Close()
	var buf bytes.Buffer
	n, err := buf.ReadFrom(&limitedReader{f, maxServersFile + 1})
	if err != nil {
		return ServersFile{}, fmt.Errorf("MCP_SERVER_CONFIG: reading %s: %w", path, err)
	}
	if n > maxServersFile {
		return ServersFile{}, fmt.Errorf("MCP_SERVER_CONFIG: %s is larger than %d bytes", path, maxServersFile)
	}
	specs, serr := ParseServers(buf.Bytes(), getenv)
	hosted, herr := ParseHosted(buf.Bytes())
	if err := errors.Join(serr, herr); err != nil {
		return ServersFile{}, fmt.Errorf("MCP_SERVER_CONFIG %s: %w", path, err)
	}
	return ServersFile{Specs: specs, Hosted: hosted}, nil
}

type limitedReader struct {
	f *os.File
	n int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errors.New("too large")
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.f.Read(p)
	l.n -= int64(n)
	return n, err
}

// ParseServers parses a servers file: {"mcpServers": {name: server, ...}}
// (VS Code's {"servers": {...}} is accepted too), keeping the file's order,
// which decides tool-name collisions (first configured wins). Disabled
// servers are dropped.
//
// Structural problems (bad JSON, unknown transport, neither command nor url)
// are returned together as an error wrapping switchboard.ErrInvalid. A
// `${VAR}` that the environment lacks does not fail the file: that one
// server gets Err set, naming the variable and the server, and the others
// keep working.
func ParseServers(data []byte, getenv func(string) string) ([]switchboard.ServerSpec, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("%w: not a JSON object: %v", switchboard.ErrInvalid, err)
	}
	raw, ok := top["mcpServers"]
	if !ok {
		raw, ok = top["servers"]
	}
	if !ok {
		return nil, fmt.Errorf("%w: missing the \"mcpServers\" object", switchboard.ErrInvalid)
	}
	names, entries, err := orderedObject(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: \"mcpServers\" %v", switchboard.ErrInvalid, err)
	}
	var specs []switchboard.ServerSpec
	var errs []error
	for i, name := range names {
		spec, err := buildSpec(name, entries[i], getenv)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if spec != nil {
			specs = append(specs, *spec)
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", switchboard.ErrInvalid, errors.Join(errs...))
	}
	return specs, nil
}

// orderedObject decodes a JSON object keeping its key order and rejecting
// duplicate keys (which would otherwise silently pick one).
func orderedObject(raw json.RawMessage) ([]string, []json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, nil, errors.New("must be an object of name -> server")
	}
	var names []string
	var vals []json.RawMessage
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		name := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, fmt.Errorf("server %q: %v", name, err)
		}
		if seen[name] {
			return nil, nil, fmt.Errorf("server %q is defined twice", name)
		}
		seen[name] = true
		names = append(names, name)
		vals = append(vals, v)
	}
	return names, vals, nil
}

func buildSpec(name string, raw json.RawMessage, getenv func(string) string) (*switchboard.ServerSpec, error) {
	if !validName.MatchString(name) {
		return nil, fmt.Errorf("server %q: name must be 1-64 characters of letters, digits, '_', '-', '.', starting with a letter or digit", name)
	}
	var fs fileServer
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&fs); err != nil {
		return nil, fmt.Errorf("server %q: %v", name, err)
	}
	if fs.Disabled {
		return nil, nil
	}
	if fs.Hosted != nil {
		if fs.Command != "" || fs.URL != "" {
			return nil, fmt.Errorf("server %q: set either \"hosted\" (a container) or \"command\"/\"url\", not both", name)
		}
		return nil, nil // ParseHosted reads it
	}
	spec := switchboard.ServerSpec{Name: name, Command: fs.Command, Args: fs.Args, Env: fs.Env, Dir: fs.Cwd,
		URL: fs.URL, Headers: fs.Headers, ToolPrefix: fs.ToolPrefix}
	tr := fs.Transport
	if tr == "" {
		tr = fs.Type
	}
	switch {
	case fs.Command != "" && fs.URL != "":
		return nil, fmt.Errorf("server %q: set either \"command\" (stdio) or \"url\" (remote), not both", name)
	case fs.Command != "":
		if tr != "" && tr != "stdio" {
			return nil, fmt.Errorf("server %q: transport %q does not fit \"command\"; use \"stdio\" or remove it", name, tr)
		}
		spec.Transport = switchboard.TransportStdio
	case fs.URL != "":
		switch tr {
		case "sse":
			spec.Transport = switchboard.TransportSSE
		case "streamable-http", "streamable_http", "streamableHttp", "http":
			spec.Transport = switchboard.TransportStreamableHTTP
		case "":
			spec.Transport = switchboard.TransportStreamableHTTP
			if strings.HasSuffix(strings.TrimRight(fs.URL, "/"), "/sse") {
				spec.Transport = switchboard.TransportSSE
			}
		default:
			return nil, fmt.Errorf("server %q: unknown transport %q; use \"sse\" or \"streamable-http\"", name, tr)
		}
	default:
		return nil, fmt.Errorf("server %q: needs \"command\" (stdio) or \"url\" (sse, streamable-http)", name)
	}
	if fs.ToolPrefix != "" && !validName.MatchString(fs.ToolPrefix) {
		return nil, fmt.Errorf("server %q: toolPrefix %q must be letters, digits, '_', '-', '.'", name, fs.ToolPrefix)
	}
	if fs.CallTimeout != "" {
		d, err := time.ParseDuration(fs.CallTimeout)
		if err != nil || d <= 0 || d > MaxCallTimeout {
			return nil, fmt.Errorf("server %q: callTimeout %q must be a positive duration up to 1h, such as \"45s\"", name, switchboard.Clip(fs.CallTimeout))
		}
		spec.CallTimeout = d
	}
	if err := interpolateSpec(&spec, getenv); err != nil {
		spec.Err = err
		return &spec, nil
	}
	if spec.URL != "" {
		u, err := url.Parse(spec.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("server %q: url must be an http:// or https:// URL", name)
		}
	}
	return &spec, nil
}

// interpolateSpec expands ${VAR} (and ${VAR:-default}) in command, args,
// env values, cwd, url and header values. The error names every missing
// variable and the server, never a value.
func interpolateSpec(s *switchboard.ServerSpec, getenv func(string) string) error {
	var missing []string
	exp := func(v string) string {
		out, miss := Expand(v, getenv)
		missing = append(missing, miss...)
		return out
	}
	s.Command = exp(s.Command)
	s.Dir = exp(s.Dir)
	s.URL = exp(s.URL)
	if s.Args != nil {
		args := make([]string, len(s.Args))
		for i, a := range s.Args {
			args[i] = exp(a)
		}
		s.Args = args
	}
	s.Env = expandMap(s.Env, exp)
	s.Headers = expandMap(s.Headers, exp)
	if len(missing) > 0 {
		return switchboard.Errorf(switchboard.ErrConfig, "server %q: environment variable %s is not set", s.Name, strings.Join(dedupe(missing), ", "))
	}
	return nil
}

func expandMap(m map[string]string, exp func(string) string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = exp(v)
	}
	return out
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

var varRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}`)

// Expand replaces ${VAR} and ${VAR:-default} in s with values from getenv.
// A variable that is unset (empty) and has no default is reported in
// missing and expands to "". Text that is not a well-formed reference,
// including a lone "$", is left as it is.
func Expand(s string, getenv func(string) string) (out string, missing []string) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	out = varRef.ReplaceAllStringFunc(s, func(m string) string {
		sub := varRef.FindStringSubmatch(m)
		if v := getenv(sub[1]); v != "" {
			return v
		}
		if sub[2] != "" {
			return sub[2][2:]
		}
		missing = append(missing, sub[1])
		return ""
	})
	return out, missing
}

// ParseServer builds one server from its entry in the servers-file format
// (the value of one mcpServers member), as the admin API stores it. A nil
// spec means the entry says "disabled". Errors wrap switchboard.ErrInvalid
// and name the server; a missing `${VAR}` sets the spec's Err instead.
func ParseServer(name string, entry json.RawMessage, getenv func(string) string) (*switchboard.ServerSpec, error) {
	spec, err := buildSpec(name, entry, getenv)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", switchboard.ErrInvalid, err)
	}
	return spec, nil
}
