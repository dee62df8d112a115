-- Balance leases (docs/decisions/0013-balance-leases.md): an instance holds a slice of an
-- account's available balance and admits requests from it in memory, writing behind in batches.
-- A lease's amount is counted in accounts.reserved_nano, so the balance check still guards it.

CREATE TABLE leases (
  -- One holder per store object (an instance may hold several in tests); the instance id ties the
  -- lease to the heartbeat that recovery watches.
  holder_id text NOT NULL,
  instance_id text NOT NULL,
  account_id text NOT NULL REFERENCES accounts (id),
  amount_nano int8 NOT NULL CHECK (amount_nano >= 0),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (holder_id, account_id)
);
CREATE INDEX leases_instance_id ON leases (instance_id);
CREATE INDEX leases_account_id ON leases (account_id);

-- A leased reservation is a request admitted from a lease and still open when its holder wrote
-- it down: its amount is inside the lease's, so recovery does not return it a second time.
ALTER TABLE reservations ADD COLUMN leased boolean NOT NULL DEFAULT false;
CREATE INDEX reservations_account_leased ON reservations (account_id) WHERE leased;
