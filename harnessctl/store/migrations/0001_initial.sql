-- The first schema. Portable SQL only (SQLite and PostgreSQL): string primary keys,
-- no AUTOINCREMENT, JSON as TEXT, float epoch timestamps. Statements end with ';' at
-- the end of a line. Never edit an applied migration: append a new numbered file.

CREATE TABLE harness (
    hash TEXT NOT NULL,
    name TEXT NOT NULL,
    path TEXT NOT NULL,
    manifest_json TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (hash)
);

CREATE TABLE run (
    id TEXT NOT NULL,
    command TEXT NOT NULL,
    harness_hash TEXT,
    suite TEXT NOT NULL,
    split TEXT NOT NULL,
    policy_id TEXT NOT NULL,
    params_json TEXT NOT NULL,
    started_at DOUBLE PRECISION NOT NULL,
    finished_at DOUBLE PRECISION,
    status TEXT NOT NULL,
    summary_json TEXT,
    PRIMARY KEY (id)
);

CREATE TABLE rollout (
    id TEXT NOT NULL,
    cache_key TEXT NOT NULL,
    run_id TEXT NOT NULL,
    harness_hash TEXT NOT NULL,
    harness_name TEXT NOT NULL,
    suite TEXT NOT NULL,
    split TEXT NOT NULL,
    task_id TEXT NOT NULL,
    task_hash TEXT NOT NULL,
    category TEXT NOT NULL,
    policy_id TEXT NOT NULL,
    policy_json TEXT NOT NULL,
    seed INTEGER NOT NULL,
    runtime_version TEXT NOT NULL,
    outcome TEXT NOT NULL,
    success BOOLEAN NOT NULL,
    reward DOUBLE PRECISION NOT NULL,
    steps INTEGER NOT NULL,
    model_calls INTEGER NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    cost_usd DOUBLE PRECISION NOT NULL,
    latency_s DOUBLE PRECISION NOT NULL,
    wall_s DOUBLE PRECISION NOT NULL,
    isolation_json TEXT NOT NULL,
    error TEXT,
    attempts INTEGER NOT NULL,
    trajectory_path TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (id)
);

CREATE UNIQUE INDEX ix_rollout_cache_key ON rollout (cache_key);
CREATE INDEX ix_rollout_run_id ON rollout (run_id);
CREATE INDEX ix_rollout_harness_hash ON rollout (harness_hash);
CREATE INDEX ix_rollout_task_id ON rollout (task_id);
CREATE INDEX ix_rollout_policy_id ON rollout (policy_id);
CREATE INDEX ix_rollout_outcome ON rollout (outcome);

CREATE TABLE model_call (
    id TEXT NOT NULL,
    rollout_id TEXT NOT NULL,
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
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (id),
    FOREIGN KEY (rollout_id) REFERENCES rollout (id)
);

CREATE INDEX ix_model_call_rollout_id ON model_call (rollout_id);

CREATE TABLE attempt (
    id TEXT NOT NULL,
    cache_key TEXT NOT NULL,
    run_id TEXT NOT NULL,
    outcome TEXT NOT NULL,
    error TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (id)
);

CREATE INDEX ix_attempt_cache_key ON attempt (cache_key);
