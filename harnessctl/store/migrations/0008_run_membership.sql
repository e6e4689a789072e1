-- Run identity (issue #41): a run is exactly the rollouts it asked for, served from the cache
-- or executed, recorded as its membership; a run made by another (evolve's judgements,
-- confirmations and re-tests) names the run it belongs to.
ALTER TABLE run ADD COLUMN parent_id TEXT;
ALTER TABLE run ADD COLUMN membership BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX ix_run_parent_id ON run (parent_id);
CREATE TABLE run_member (
    run_id TEXT NOT NULL,
    rollout_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    seed INTEGER NOT NULL,
    PRIMARY KEY (run_id, rollout_id)
);
