-- The person behind a logged call when an identity provider's token sent
-- it: principal is its issuer and subject joined by a space,
-- principal_name their e-mail or name. Empty for static tokens and rows
-- from before.
ALTER TABLE kb_agent_run_tool_calls ADD COLUMN principal TEXT NOT NULL DEFAULT '';
ALTER TABLE kb_agent_run_tool_calls ADD COLUMN principal_name TEXT NOT NULL DEFAULT '';
