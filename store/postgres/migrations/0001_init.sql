-- The kb schema: projects, their MCP servers, secrets and API tokens, the
-- hosted-server and workspace registry, and the tool-call log.
-- store/sqlite/migrations mirrors it (kb_ table prefix, integer times).

CREATE TYPE kb.mcp_transport AS ENUM ('stdio', 'sse', 'streamable_http');
CREATE TYPE kb.container_type AS ENUM ('mcp_server', 'workspace');

CREATE TABLE kb.projects (
    id          text PRIMARY KEY CHECK (id <> ''),
    description text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);

CREATE TABLE kb.project_mcp_servers (
    id          uuid PRIMARY KEY,
    project_id  text NOT NULL REFERENCES kb.projects (id) ON DELETE CASCADE,
    product_id  text CHECK (product_id <> ''), -- NULL: added by hand
    name        text NOT NULL CHECK (name <> ''),
    description text NOT NULL DEFAULT '',
    transport   kb.mcp_transport NOT NULL,
    config      jsonb NOT NULL DEFAULT '{}',
    enabled     boolean NOT NULL DEFAULT true,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    UNIQUE (project_id, name)
);
CREATE INDEX project_mcp_servers_product ON kb.project_mcp_servers (project_id, product_id);

CREATE TABLE kb.agent_workspaces (
    id               uuid PRIMARY KEY,
    project_id       text NOT NULL REFERENCES kb.projects (id) ON DELETE CASCADE,
    container_type   kb.container_type NOT NULL,
    image            text NOT NULL DEFAULT '',
    config           jsonb NOT NULL DEFAULT '{}',
    status           text NOT NULL DEFAULT '',
    provider         text NOT NULL DEFAULT '',
    container_id     text NOT NULL DEFAULT '',
    agent_session_id text NOT NULL DEFAULT '',
    last_used_at     timestamptz,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL
);
CREATE INDEX agent_workspaces_project ON kb.agent_workspaces (project_id, created_at);

-- No foreign key to projects: the log is written in batches off the hot
-- path and must not lose a batch to a project deleted meanwhile.
CREATE TABLE kb.agent_run_tool_calls (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project_id  text NOT NULL,
    session_id  text NOT NULL DEFAULT '',
    server      text NOT NULL DEFAULT '',
    tool        text NOT NULL DEFAULT '',
    arguments   json NOT NULL DEFAULT '{}', -- redacted by the writer; json keeps the text as sent, \u0000 included
    outcome     text NOT NULL CHECK (outcome IN ('ok', 'tool_error', 'error')),
    code        integer NOT NULL DEFAULT 0, -- JSON-RPC error code when outcome = 'error'
    duration_us bigint NOT NULL CHECK (duration_us >= 0),
    started_at  timestamptz NOT NULL
);
CREATE INDEX agent_run_tool_calls_project ON kb.agent_run_tool_calls (project_id, started_at DESC, id DESC);
CREATE INDEX agent_run_tool_calls_started ON kb.agent_run_tool_calls (started_at DESC, id DESC);

CREATE TABLE kb.project_secrets (
    project_id text NOT NULL REFERENCES kb.projects (id) ON DELETE CASCADE,
    name       text NOT NULL CHECK (name <> ''),
    ciphertext bytea NOT NULL, -- encrypted above the store; never plaintext
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (project_id, name)
);

CREATE TABLE kb.project_tokens (
    id         uuid PRIMARY KEY,
    project_id text NOT NULL REFERENCES kb.projects (id) ON DELETE CASCADE,
    name       text NOT NULL DEFAULT '',
    hash       bytea NOT NULL UNIQUE, -- the token itself is never stored
    created_at timestamptz NOT NULL,
    revoked_at timestamptz
);
CREATE INDEX project_tokens_project ON kb.project_tokens (project_id, created_at);
