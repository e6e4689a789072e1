-- Liveness of runs and claims on rollouts, so that a run that died is marked as such on the
-- next start and concurrent runs on one store never execute the same rollout twice.
ALTER TABLE run ADD COLUMN host TEXT NOT NULL DEFAULT '';
ALTER TABLE run ADD COLUMN pid INTEGER;
ALTER TABLE run ADD COLUMN pid_started TEXT NOT NULL DEFAULT '';
ALTER TABLE run ADD COLUMN heartbeat_at DOUBLE PRECISION;
CREATE TABLE rollout_claim (
    cache_key TEXT NOT NULL,
    run_id TEXT NOT NULL,
    claimed_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (cache_key)
);
CREATE INDEX ix_rollout_claim_run_id ON rollout_claim (run_id);
