-- One call log for every model call: rollouts' policy calls, the calls of infra-failed
-- attempts, editor calls (by edit) and voter calls. model_call.rollout_id becomes nullable,
-- which SQLite cannot ALTER, so the table is rebuilt (the portable way on both databases):
-- create the new shape, copy, drop the old, rename. Existing rows are policy calls of
-- stored rollouts; their run_id is copied from the rollout.

CREATE TABLE model_call_0004 (
    id TEXT NOT NULL,
    purpose TEXT NOT NULL,
    rollout_id TEXT,
    attempt_id TEXT,
    edit_id TEXT,
    run_id TEXT,
    idx INTEGER NOT NULL,
    model TEXT NOT NULL,
    status TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    cost_usd DOUBLE PRECISION NOT NULL,
    latency_s DOUBLE PRECISION NOT NULL,
    attempts INTEGER NOT NULL,
    error TEXT,
    reply TEXT,
    params_json TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (id),
    FOREIGN KEY (rollout_id) REFERENCES rollout (id),
    FOREIGN KEY (attempt_id) REFERENCES attempt (id)
);

INSERT INTO model_call_0004 (
    id, purpose, rollout_id, attempt_id, edit_id, run_id, idx, model, status, prompt_tokens,
    completion_tokens, cost_usd, latency_s, attempts, error, reply, params_json, created_at
)
SELECT
    id, 'policy', rollout_id, NULL, NULL,
    (SELECT rollout.run_id FROM rollout WHERE rollout.id = model_call.rollout_id),
    idx, model, status, prompt_tokens, completion_tokens, cost_usd, latency_s, attempts,
    error, reply, NULL, created_at
FROM model_call;

DROP TABLE model_call;

ALTER TABLE model_call_0004 RENAME TO model_call;

CREATE INDEX ix_model_call_purpose ON model_call (purpose);

CREATE INDEX ix_model_call_rollout_id ON model_call (rollout_id);

CREATE INDEX ix_model_call_attempt_id ON model_call (attempt_id);

CREATE INDEX ix_model_call_edit_id ON model_call (edit_id);

CREATE INDEX ix_model_call_run_id ON model_call (run_id);
