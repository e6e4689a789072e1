-- Where a rollout came from: '' when it ran against this store, else the read-through cache
-- (another store, opened read-only) it was copied from (harnessctl/store/readthrough.py).
ALTER TABLE rollout ADD COLUMN origin TEXT NOT NULL DEFAULT ''
