-- The table the job upserts into: one row per order, at its latest version.
CREATE TABLE IF NOT EXISTS orders (
  id text PRIMARY KEY,
  version integer NOT NULL,
  status text NOT NULL,
  amount_cents bigint NOT NULL
);
