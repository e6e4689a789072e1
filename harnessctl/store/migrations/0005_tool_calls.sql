-- Function calling: the tool calls a model reply made (OpenAI shape, JSON), beside its text.
ALTER TABLE model_call ADD COLUMN tool_calls_json TEXT;
