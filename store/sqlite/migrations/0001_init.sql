-- The kb schema of store/postgres/migrations, for SQLite: no schemas, so
-- tables are prefixed kb_; times are INTEGER microseconds since the Unix
-- epoch (UTC), which sort and compare exactly; booleans are 0 or 1; JSON
-- is TEXT (server and workspace config in a canonical form: compact,
-- sorted keys, so text equality is JSON equality); enums are CHECKs.

CREATE TABLE kb_projects (
    id          TEXT PRIMARY KEY CHECK (id <> ''),
    description TEXT NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
) STRICT;

CREATE TABLE kb_project_mcp_servers (
    id          TEXT PRIMARY KEY,
    project_id  TEXT NOT NULL REFERENCES kb_projects (id) ON DELETE CASCADE,
    product_id  TEXT CHECK (product_id <> ''), -- NULL: added by hand
    name        TEXT NOT NULL CHECK (name <> ''),
    description TEXT NOT NULL DEFAULT '',
    transport   TEXT NOT NULL CHECK (transport IN ('stdio', 'sse', 'streamable_http')),
    config      TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(config)),
    enabled     INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    UNIQUE (project_id, name)
) STRICT;
CREATE INDEX kb_project_mcp_servers_product ON kb_project_mcp_servers (project_id, product_id);

CREATE TABLE kb_agent_workspaces (
    id               TEXT PRIMARY KEY,
    project_id       TEXT NOT NULL REFERENCES kb_projects (id) ON DELETE CASCADE,
    container_type   TEXT NOT NULL CHECK (container_type IN ('mcp_server', 'workspace')),
    image            TEXT NOT NULL DEFAULT '',
    config           TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(config)),
    status           TEXT NOT NULL DEFAULT '',
    provider         TEXT NOT NULL DEFAULT '',
    container_id     TEXT NOT NULL DEFAULT '',
    agent_session_id TEXT NOT NULL DEFAULT '',
    last_used_at     INTEGER,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
) STRICT;
CREATE INDEX kb_agent_workspaces_project ON kb_agent_workspaces (project_id, created_at);

-- No foreign key to projects: the log is written in batches off the hot
-- path and must not lose a batch to a project deleted meanwhile.
CREATE TABLE kb_agent_run_tool_calls (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    project_id  TEXT NOT NULL,
    session_id  TEXT NOT NULL DEFAULT '',
    server      TEXT NOT NULL DEFAULT '',
    tool        TEXT NOT NULL DEFAULT '',
    arguments   TEXT NOT NULL DEFAULT '{}', -- redacted by the writer; kept as sent
    outcome     TEXT NOT NULL CHECK (outcome IN ('ok', 'tool_error', 'error')),
    code        INTEGER NOT NULL DEFAULT 0, -- JSON-RPC error code when outcome = 'error'
    duration_us INTEGER NOT NULL CHECK (duration_us >= 0),
    started_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX kb_agent_run_tool_calls_project ON kb_agent_run_tool_calls (project_id, started_at DESC, id DESC);
CREATE INDEX kb_agent_run_tool_calls_started ON kb_agent_run_tool_calls (started_at DESC, id DESC);

CREATE TABLE kb_project_secrets (
    project_id TEXT NOT NULL REFERENCES kb_projects (id) ON DELETE CASCADE,
    name       TEXT NOT NULL CHECK (name <> ''),
    ciphertext BLOB NOT NULL, -- encrypted above the store; never plaintext
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (project_id, name)
) STRICT;

CREATE TABLE kb_project_tokens (
    id         TEXT PRIMARY KEY,
    project_id TEXT NOT NULL REFERENCES kb_projects (id) ON DELETE CASCADE,
    name       TEXT NOT NULL DEFAULT '',
    hash       BLOB NOT NULL UNIQUE, -- the token itself is never stored
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
) STRICT;
CREATE INDEX kb_project_tokens_project ON kb_project_tokens (project_id, created_at);
