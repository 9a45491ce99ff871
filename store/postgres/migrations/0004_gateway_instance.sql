-- The gateway's instance id: the default name it labels its containers and
-- volumes with on the Docker engine (MCP_SERVER_INSTANCE overrides it), so
-- two deployments whose stores look alike (two compose projects on
-- postgres:5432/switchboard) never take each other's containers for their
-- own; replicas sharing this database share it. Made here, once, for a new
-- store; a store that already served (it has projects) gets none, and the
-- gateway keeps the name it derived before, so it still finds its
-- containers.
CREATE TABLE kb.gateway_instance (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    id        text NOT NULL CHECK (id <> '')
);
INSERT INTO kb.gateway_instance (id)
    SELECT substr(md5(random()::text || clock_timestamp()::text), 1, 12) WHERE NOT EXISTS (SELECT 1 FROM kb.projects);
