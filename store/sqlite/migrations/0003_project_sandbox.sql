-- sandbox_enabled is a project's switch of the gateway's sandbox tools,
-- set through the admin API: NULL follows MCP_SERVER_SANDBOX. Stored so
-- it survives restarts and every replica applies it on its sync.
ALTER TABLE kb_projects ADD COLUMN sandbox_enabled INTEGER CHECK (sandbox_enabled IN (0, 1));
