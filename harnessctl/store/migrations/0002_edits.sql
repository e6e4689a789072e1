-- Edit records: every harness edit proposed by an editor, accepted or not. These rows are
-- the harness-engineer training data (prompt, response, patch, validation, reward).

CREATE TABLE edit (
    id TEXT NOT NULL,
    edit_key TEXT NOT NULL,
    evolve_id TEXT NOT NULL,
    parent_hash TEXT NOT NULL,
    parent_name TEXT NOT NULL,
    direction TEXT NOT NULL,
    round INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    editor TEXT NOT NULL,
    prompt TEXT NOT NULL,
    response TEXT NOT NULL,
    patch TEXT NOT NULL,
    diff TEXT NOT NULL,
    status TEXT NOT NULL,
    reason TEXT,
    detail TEXT,
    batch_size INTEGER NOT NULL,
    control_size INTEGER NOT NULL,
    rescues INTEGER NOT NULL,
    regressions INTEGER NOT NULL,
    reward DOUBLE PRECISION NOT NULL,
    p_value DOUBLE PRECISION,
    accepted BOOLEAN NOT NULL,
    child_name TEXT,
    child_hash TEXT,
    git_commit TEXT,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    cost_usd DOUBLE PRECISION NOT NULL,
    metrics_json TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (id)
);

CREATE UNIQUE INDEX ix_edit_edit_key ON edit (edit_key);

CREATE INDEX ix_edit_evolve_id ON edit (evolve_id);

CREATE INDEX ix_edit_parent_hash ON edit (parent_hash);
