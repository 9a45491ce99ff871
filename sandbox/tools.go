package sandbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

// The tool names, as the microsandbox MCP server spells them.
const (
	ToolExecuteCode    = "execute_code"
	ToolExecuteCommand = "execute_command"
	ToolGetSessions    = "get_sessions"
	ToolStopSession    = "stop_session"
	ToolGetVolumePath  = "get_volume_path"

	ToolListWorkspaces    = "list_workspaces"
	ToolAttachWorkspace   = "attach_workspace"
	ToolDetachWorkspace   = "detach_workspace"
	ToolSnapshotWorkspace = "snapshot_workspace"
	ToolRestoreSnapshot   = "restore_snapshot"
	ToolDeleteWorkspace   = "delete_workspace"
)

// Templates and flavors accepted by the tools.
var (
	Templates = []string{"python", "node"}
	Flavors   = []string{"small", "medium", "large"}
)

// maxCodeBytes bounds code and command text: they travel as one argv
// string, and Linux refuses a single argument above 128 KiB.
const maxCodeBytes = 120 << 10

// toolDefs is the tools/list entry of every sandbox tool. The texts say
// what an agent needs to act: where files live, that the network is off,
// the timeouts, and when sessions go away.
func (s *Service) toolDefs() []json.RawMessage {
	idle := s.opts.SessionTimeout.String()
	kept := "deleted as soon as its session ends"
	if s.opts.WorkspaceRetention > 0 {
		kept = "deleted " + s.opts.WorkspaceRetention.String() + " after its session ends"
	}
	maxT := int(s.opts.MaxTimeout / time.Second)
	defT := int(s.opts.DefaultTimeout / time.Second)
	net := "There is no network access."
	if s.opts.Network != "" {
		net = "The network is reachable."
	}
	common := fmt.Sprintf(" Runs as an unprivileged user in an isolated container; the working directory /workspace keeps its files between calls and across sessions of this project's workspace. %s Omit session_id to start a new session (its id comes back as session_id); pass it to continue in the same container (files, installed packages). Sessions end after %s idle. timeout is in seconds (default %d, at most %d); on timeout every process the call started is killed and timed_out is true. A non-zero exit_code is a normal result.", net, idle, defT, maxT)
	sessionProp := map[string]any{"type": "string", "description": "id of an existing session (from a previous result or get_sessions); omit to start a new session"}
	flavorProp := map[string]any{"type": "string", "enum": Flavors, "description": "resources of a new session: small 1 CPU/1 GB, medium 2 CPU/2 GB, large 4 CPU/4 GB (capped by the machine); default small. Cannot change for an existing session"}
	templateProp := func(d string) map[string]any {
		return map[string]any{"type": "string", "enum": Templates, "description": d}
	}
	timeoutProp := map[string]any{"type": "number", "exclusiveMinimum": 0, "maximum": maxT, "description": fmt.Sprintf("seconds before every process of this call is killed; default %d, at most %d", defT, maxT)}
	stdinProp := map[string]any{"type": "string", "description": "text given to the program on standard input"}
	envProp := map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}, "description": "extra environment variables for this call only (names: letters, digits, underscore)"}
	execOut := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"session_id":        map[string]any{"type": "string"},
			"session_created":   map[string]any{"type": "boolean", "description": "true when this call started the session"},
			"template":          map[string]any{"type": "string"},
			"flavor":            map[string]any{"type": "string"},
			"workspace_id":      map[string]any{"type": "string"},
			"stdout":            map[string]any{"type": "string"},
			"stderr":            map[string]any{"type": "string"},
			"stdout_truncated":  map[string]any{"type": "boolean"},
			"stderr_truncated":  map[string]any{"type": "boolean"},
			"stdout_bytes":      map[string]any{"type": "integer", "description": "bytes the program wrote, kept or not"},
			"stderr_bytes":      map[string]any{"type": "integer"},
			"exit_code":         map[string]any{"type": []string{"integer", "null"}, "description": "null when the call timed out"},
			"execution_time_ms": map[string]any{"type": "integer"},
			"timed_out":         map[string]any{"type": "boolean"},
			"success":           map[string]any{"type": "boolean", "description": "exit_code is 0 and the call did not time out"},
		},
		"required": []string{"session_id", "session_created", "stdout", "stderr", "stdout_truncated", "stderr_truncated", "stdout_bytes", "stderr_bytes", "exit_code", "execution_time_ms", "timed_out", "success"},
	}
	sessionObj := map[string]any{"type": "object", "properties": map[string]any{
		"session_id": map[string]any{"type": "string"}, "template": map[string]any{"type": "string"}, "flavor": map[string]any{"type": "string"},
		"status": map[string]any{"type": "string"}, "created_at": map[string]any{"type": "string", "format": "date-time"},
		"last_used_at": map[string]any{"type": "string", "format": "date-time"}, "agent_session_id": map[string]any{"type": "string"},
		"workspace_id": map[string]any{"type": "string"}, "volume": map[string]any{"type": "string"},
	}}
	tools := []map[string]any{
		{
			"name":        ToolExecuteCode,
			"description": "Run a Python or Node.js program and return its output. The code is run with python3 -c or node -e (stdin stays free for the stdin argument)." + common,
			"inputSchema": map[string]any{
				"type": "object", "additionalProperties": false, "required": []string{"code"},
				"properties": map[string]any{
					"code":       map[string]any{"type": "string", "minLength": 1, "description": "the program's source"},
					"template":   templateProp("language: python (python3) or node; default python"),
					"session_id": sessionProp, "flavor": flavorProp, "timeout": timeoutProp, "stdin": stdinProp, "env": envProp,
				},
			},
			"outputSchema": execOut,
		},
		{
			"name":        ToolExecuteCommand,
			"description": "Run a command and return its output. With args, command is the program and args its arguments (no shell); without args, command is a shell line run with sh -c (pipes, redirection, &&)." + common,
			"inputSchema": map[string]any{
				"type": "object", "additionalProperties": false, "required": []string{"command"},
				"properties": map[string]any{
					"command":     map[string]any{"type": "string", "minLength": 1, "description": "a shell line, or the program when args is given"},
					"args":        map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "arguments, passed without a shell"},
					"template":    templateProp("image of a new session: python or node; default python"),
					"working_dir": map[string]any{"type": "string", "description": "directory to run in: absolute, or relative to /workspace; default /workspace"},
					"session_id":  sessionProp, "flavor": flavorProp, "timeout": timeoutProp, "stdin": stdinProp, "env": envProp,
				},
			},
			"outputSchema": execOut,
		},
		{
			"name":        ToolGetSessions,
			"description": "List this project's sandbox sessions (or the one named by session_id): id, template, flavor, status, when created and last used, the agent session attached, and the workspace.",
			"inputSchema": map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{
				"session_id": map[string]any{"type": "string", "description": "only this session"},
			}},
			"outputSchema": map[string]any{"type": "object", "required": []string{"sessions"}, "properties": map[string]any{
				"sessions": map[string]any{"type": "array", "items": sessionObj},
			}},
		},
		{
			"name":        ToolStopSession,
			"description": "Stop a sandbox session: its processes end and its container is removed; a stopped session's id is no longer usable. The workspace (files in /workspace) is kept, except one made by a call without session_id that nobody attached, detached or snapshotted: that one is " + kept + " (workspace_retained says whether it is still there). Fails, naming the holder, while another agent session has its workspace attached.",
			"inputSchema": map[string]any{"type": "object", "additionalProperties": false, "required": []string{"session_id"}, "properties": map[string]any{
				"session_id": map[string]any{"type": "string", "description": "the session to stop"},
			}},
			"outputSchema": map[string]any{"type": "object", "required": []string{"session_id", "stopped"}, "properties": map[string]any{
				"session_id": map[string]any{"type": "string"}, "stopped": map[string]any{"type": "boolean"},
				"workspace_id": map[string]any{"type": "string"}, "workspace_retained": map[string]any{"type": "boolean"},
			}},
		},
		{
			"name":        ToolGetVolumePath,
			"description": "Show where files live: what is mounted into every session (a host directory's path or a Docker volume's name, and the path in the container; read_only when it cannot be written), plus the session's workspace at /workspace when session_id is given.",
			"inputSchema": map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{
				"session_id": map[string]any{"type": "string", "description": "include this session's workspace"},
			}},
			"outputSchema": map[string]any{"type": "object", "required": []string{"volumes"}, "properties": map[string]any{
				"session_id": map[string]any{"type": "string"},
				"volumes": map[string]any{"type": "array", "items": map[string]any{"type": "object", "properties": map[string]any{
					"source": map[string]any{"type": "string", "description": "the host directory (type bind) or the Docker volume name (type volume)"},
					"type":   map[string]any{"type": "string", "enum": []string{"bind", "volume"}}, "container_path": map[string]any{"type": "string"},
					"read_only": map[string]any{"type": "boolean"}, "kind": map[string]any{"type": "string", "enum": []string{"workspace", "configured"}},
				}}},
			}},
		},
	}
	if s.opts.Store != nil {
		wsObj := map[string]any{"type": "object", "properties": map[string]any{
			"workspace_id": map[string]any{"type": "string"}, "status": map[string]any{"type": "string", "enum": []string{WorkspaceReady, WorkspaceRunning, WorkspaceSnapshot}},
			"volume": map[string]any{"type": "string"}, "agent_session_id": map[string]any{"type": "string"}, "session_id": map[string]any{"type": "string"},
			"snapshot_of": map[string]any{"type": "string"}, "last_used_at": map[string]any{"type": "string"}, "created_at": map[string]any{"type": "string"},
			"anonymous":  map[string]any{"type": "boolean", "description": "made by a call without session_id and never attached, detached or snapshotted: " + kept},
			"expires_at": map[string]any{"type": "string", "description": "when an anonymous workspace whose session ended is deleted"},
			"attach_history": map[string]any{"type": "array", "description": "the last attaches, oldest first", "items": map[string]any{"type": "object", "properties": map[string]any{
				"previous_agent_session_id": map[string]any{"type": "string"}, "agent_session_id": map[string]any{"type": "string"}, "at": map[string]any{"type": "string"},
			}}},
		}}
		idIn := func(name, desc string, extra map[string]any) map[string]any {
			props := map[string]any{name: map[string]any{"type": "string", "minLength": 1, "description": desc}}
			for k, v := range extra {
				props[k] = v
			}
			return map[string]any{"type": "object", "additionalProperties": false, "required": []string{name}, "properties": props}
		}
		tools = append(tools,
			map[string]any{"name": ToolListWorkspaces,
				"description":  "List this project's workspaces (the persistent /workspace directories sessions run on) and snapshots, with who is attached and which session runs on each.",
				"inputSchema":  map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{}},
				"outputSchema": map[string]any{"type": "object", "required": []string{"workspaces"}, "properties": map[string]any{"workspaces": map[string]any{"type": "array", "items": wsObj}}}},
			map[string]any{"name": ToolAttachWorkspace,
				"description":  "Attach a workspace to your MCP session, exclusively, and get a sandbox session on it (session_id for execute_code/execute_command): you see exactly the files the previous agent left. Fails, naming the holder, while another agent session is attached. Running processes do not survive a detach; files such as .env persist but are not loaded automatically.",
				"inputSchema":  idIn("workspace_id", "the workspace, from list_workspaces or a result's workspace_id", map[string]any{"template": map[string]any{"type": "string", "enum": Templates}, "flavor": map[string]any{"type": "string", "enum": Flavors}}),
				"outputSchema": sessionObj},
			map[string]any{"name": ToolDetachWorkspace,
				"description":  "Detach a workspace: its session stops (processes end), its files stay, and another agent may attach it.",
				"inputSchema":  idIn("workspace_id", "the workspace to release", nil),
				"outputSchema": wsObj},
			map[string]any{"name": ToolSnapshotWorkspace,
				"description":  "Snapshot a workspace: a consistent copy of its files (the session is paused while copying), restorable later with restore_snapshot. Returns the snapshot's id as workspace_id.",
				"inputSchema":  idIn("workspace_id", "the workspace to copy", nil),
				"outputSchema": wsObj},
			map[string]any{"name": ToolRestoreSnapshot,
				"description":  "Restore a snapshot into a new workspace (new id, status ready) holding exactly the snapshot's files; attach it to work in it.",
				"inputSchema":  idIn("snapshot_id", "the snapshot, from snapshot_workspace or list_workspaces", nil),
				"outputSchema": wsObj},
			map[string]any{"name": ToolDeleteWorkspace,
				"description": "Delete a workspace or a snapshot for good: the session running on it (if any) stops and its files are removed. Give workspace_id (a snapshot's id is its workspace_id in list_workspaces) or snapshot_id. Fails, naming the holder, while another agent session has the workspace attached.",
				"inputSchema": map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{
					"workspace_id": map[string]any{"type": "string", "minLength": 1, "description": "the workspace or snapshot to delete"},
					"snapshot_id":  map[string]any{"type": "string", "minLength": 1, "description": "the snapshot to delete (instead of workspace_id)"},
				}},
				"outputSchema": map[string]any{"type": "object", "required": []string{"workspace_id", "deleted"}, "properties": map[string]any{
					"workspace_id": map[string]any{"type": "string"}, "deleted": map[string]any{"type": "boolean"},
					"snapshot": map[string]any{"type": "boolean", "description": "it was a snapshot"}, "stopped_session_id": map[string]any{"type": "string", "description": "the session stopped with it"},
				}}},
		)
	}
	// Not advertised as ready when it cannot work: with the engine
	// unreachable at the last probe, every description begins saying so.
	down := s.engineDown()
	out := make([]json.RawMessage, len(tools))
	for i, t := range tools {
		if down != "" {
			if d, ok := t["description"].(string); ok {
				t["description"] = "UNAVAILABLE now: " + down + ". " + d
			}
		}
		out[i], _ = json.Marshal(t)
	}
	return out
}

// execArgs are the arguments of execute_code and execute_command.
type execArgs struct {
	Code       *string           `json:"code"`
	Command    *string           `json:"command"`
	Args       []string          `json:"args"`
	Template   string            `json:"template"`
	SessionID  *string           `json:"session_id"`
	Flavor     string            `json:"flavor"`
	Timeout    *float64          `json:"timeout"`
	WorkingDir string            `json:"working_dir"`
	Stdin      *string           `json:"stdin"`
	Env        map[string]string `json:"env"`
}

// sessionArgs are the arguments of get_sessions, stop_session and
// get_volume_path.
type sessionArgs struct {
	SessionID *string `json:"session_id"`
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// invalid is an invalid-arguments error (-32602).
func invalid(format string, args ...any) error {
	return switchboard.Errorf(switchboard.ErrInvalid, format, args...)
}

// decodeArgs decodes raw into v, refusing unknown members so a typo
// (timeout_seconds for timeout) is reported rather than ignored.
func decodeArgs(tool string, raw json.RawMessage, allowed []string, v any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return invalid("%s: arguments must be a JSON object", tool)
	}
	for k := range m {
		if !slices.Contains(allowed, k) {
			return invalid("%s: unknown argument %q; accepted: %s", tool, k, strings.Join(allowed, ", "))
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if ok := asTypeError(err, &te); ok {
			return invalid("%s: argument %q must be %s", tool, te.Field, jsonKind(te.Type.Kind().String()))
		}
		return invalid("%s: arguments are not valid: %v", tool, err)
	}
	return nil
}

func asTypeError(err error, te **json.UnmarshalTypeError) bool {
	e, ok := err.(*json.UnmarshalTypeError)
	if ok {
		*te = e
	}
	return ok
}

func jsonKind(k string) string {
	switch k {
	case "string", "ptr":
		return "a string"
	case "float64":
		return "a number"
	case "slice":
		return "an array of strings"
	case "map":
		return "an object of string values"
	}
	return "of another type"
}

var (
	codeArgNames    = []string{"code", "template", "session_id", "flavor", "timeout", "stdin", "env"}
	commandArgNames = []string{"command", "args", "template", "session_id", "flavor", "timeout", "working_dir", "stdin", "env"}
)

// request is a validated execution request.
type request struct {
	tool       string
	argv       []string // without the timeout wrapper
	template   string   // "" = the session's, or python for a new one
	flavor     string   // "" = the session's, or small for a new one
	sessionID  string   // "" = new session
	hasSession bool
	timeout    time.Duration
	workingDir string
	stdin      *string
	env        []string
}

// parseExec validates execute_code / execute_command arguments. Errors:
// ErrInvalid (-32602) for what the client must fix, ErrResourceLimit
// (-32600) for a timeout or code size above the caps.
func (s *Service) parseExec(tool string, raw json.RawMessage) (request, error) {
	var a execArgs
	names := codeArgNames
	if tool == ToolExecuteCommand {
		names = commandArgNames
	}
	if err := decodeArgs(tool, raw, names, &a); err != nil {
		return request{}, err
	}
	r := request{tool: tool, template: a.Template, flavor: a.Flavor, stdin: a.Stdin, workingDir: "/workspace"}
	if a.Template != "" && !slices.Contains(Templates, a.Template) {
		return r, invalid("%s: unknown template %q; use one of: %s", tool, a.Template, strings.Join(Templates, ", "))
	}
	if a.Flavor != "" && !slices.Contains(Flavors, a.Flavor) {
		return r, invalid("%s: unknown flavor %q; use one of: %s", tool, a.Flavor, strings.Join(Flavors, ", "))
	}
	if a.SessionID != nil {
		if *a.SessionID == "" {
			return r, invalid("%s: session_id is empty; omit it to start a new session", tool)
		}
		r.sessionID, r.hasSession = *a.SessionID, true
	}
	r.timeout = s.opts.DefaultTimeout
	if a.Timeout != nil {
		t := *a.Timeout
		if !(t > 0) {
			return r, invalid("%s: timeout must be a positive number of seconds, got %v", tool, t)
		}
		d := time.Duration(t * float64(time.Second))
		if d > s.opts.MaxTimeout {
			// A bad argument (-32602), as microsandbox answers it.
			return r, invalid("%s: timeout %vs is above the limit of %ds (MCP_SERVER_SANDBOX_MAX_TIMEOUT); pass at most that", tool, t, int(s.opts.MaxTimeout/time.Second))
		}
		if d < 10*time.Millisecond {
			d = 10 * time.Millisecond
		}
		r.timeout = d
	}
	for k, v := range a.Env {
		if !envName.MatchString(k) {
			return r, invalid("%s: env name %q is not valid; use letters, digits and underscore, not starting with a digit", tool, k)
		}
		if strings.ContainsRune(v, 0) {
			return r, invalid("%s: env %s contains a NUL character", tool, k)
		}
		r.env = append(r.env, k+"="+v)
	}
	slices.Sort(r.env)
	switch tool {
	case ToolExecuteCode:
		if a.Code == nil || *a.Code == "" {
			return r, invalid("execute_code: code is required: the program to run")
		}
		if err := argText(tool, "code", *a.Code); err != nil {
			return r, err
		}
		if r.template == "node" {
			r.argv = []string{"node", "-e", *a.Code}
		} else {
			r.argv = []string{"python3", "-c", *a.Code}
		}
	case ToolExecuteCommand:
		if a.Command == nil || strings.TrimSpace(*a.Command) == "" {
			return r, invalid("execute_command: command is required: a shell line, or a program when args is given")
		}
		if err := argText(tool, "command", *a.Command); err != nil {
			return r, err
		}
		if a.Args != nil {
			r.argv = append([]string{*a.Command}, a.Args...)
			for _, x := range a.Args {
				if err := argText(tool, "args", x); err != nil {
					return r, err
				}
			}
		} else {
			r.argv = []string{"sh", "-c", *a.Command}
		}
		if a.WorkingDir != "" {
			if strings.ContainsRune(a.WorkingDir, 0) {
				return r, invalid("execute_command: working_dir contains a NUL character")
			}
			wd := a.WorkingDir
			if !strings.HasPrefix(wd, "/") {
				wd = path.Join("/workspace", wd)
			}
			r.workingDir = path.Clean(wd)
		}
	}
	return r, nil
}

func argText(tool, name, v string) error {
	if strings.ContainsRune(v, 0) {
		return invalid("%s: %s contains a NUL character", tool, name)
	}
	if len(v) > maxCodeBytes {
		return switchboard.Errorf(switchboard.ErrResourceLimit, "%s: %s is %d bytes, above the limit of %d; write it to a file in /workspace (execute_command with stdin: cat > file) and run the file", tool, name, len(v), maxCodeBytes)
	}
	return nil
}

// parseSession validates the session_id-only tools' arguments.
func parseSession(tool string, raw json.RawMessage, required bool) (string, error) {
	var a sessionArgs
	if err := decodeArgs(tool, raw, []string{"session_id"}, &a); err != nil {
		return "", err
	}
	if a.SessionID == nil || *a.SessionID == "" {
		if required {
			return "", invalid("%s: session_id is required", tool)
		}
		return "", nil
	}
	return *a.SessionID, nil
}

// wsArgs are the arguments of the workspace tools.
type wsArgs struct {
	WorkspaceID string `json:"workspace_id"`
	SnapshotID  string `json:"snapshot_id"`
	Template    string `json:"template"`
	Flavor      string `json:"flavor"`
}

func parseWorkspace(tool string, raw json.RawMessage) (wsArgs, error) {
	var a wsArgs
	names := []string{"workspace_id"}
	switch tool {
	case ToolListWorkspaces:
		names = nil
	case ToolAttachWorkspace:
		names = []string{"workspace_id", "template", "flavor"}
	case ToolRestoreSnapshot:
		names = []string{"snapshot_id"}
	case ToolDeleteWorkspace:
		names = []string{"workspace_id", "snapshot_id"}
	}
	if err := decodeArgs(tool, raw, names, &a); err != nil {
		return a, err
	}
	switch {
	case a.Template != "" && !slices.Contains(Templates, a.Template):
		return a, invalid("%s: unknown template %q; use one of: %s", tool, a.Template, strings.Join(Templates, ", "))
	case a.Flavor != "" && !slices.Contains(Flavors, a.Flavor):
		return a, invalid("%s: unknown flavor %q; use one of: %s", tool, a.Flavor, strings.Join(Flavors, ", "))
	case tool == ToolRestoreSnapshot && a.SnapshotID == "":
		return a, invalid("%s: snapshot_id is required", tool)
	case tool == ToolDeleteWorkspace:
		if (a.WorkspaceID == "") == (a.SnapshotID == "") {
			return a, invalid("%s: give workspace_id or snapshot_id (one of them)", tool)
		}
		a.WorkspaceID += a.SnapshotID
	case tool != ToolRestoreSnapshot && tool != ToolListWorkspaces && a.WorkspaceID == "":
		return a, invalid("%s: workspace_id is required", tool)
	}
	return a, nil
}
