-- Behavior profiles: one row per build of a profile of (harness hash, policy id, suite, split).
-- Rows are never updated except for the `current` flag, so every earlier profile stays
-- queryable (history per policy); exactly one row per key is current.

CREATE TABLE profile (
    id TEXT NOT NULL,
    harness_hash TEXT NOT NULL,
    harness_name TEXT NOT NULL,
    policy_id TEXT NOT NULL,
    suite TEXT NOT NULL,
    split TEXT NOT NULL,
    kind TEXT NOT NULL,
    current BOOLEAN NOT NULL,
    data_json TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (id)
);

CREATE INDEX ix_profile_harness_hash ON profile (harness_hash);

CREATE INDEX ix_profile_policy_id ON profile (policy_id);
