-- What a logged call called: '' a tool, 'prompt' a prompts/get (tool
-- holds the prompt's name), 'resource' a resources/read (tool holds the
-- URI). Rows from before are tool calls.
ALTER TABLE kb.agent_run_tool_calls ADD COLUMN IF NOT EXISTS kind text NOT NULL DEFAULT '';
