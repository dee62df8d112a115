-- Switchyard store, first schema: accounts, API keys, ledger, reservations, instances, usage log
-- and change log. Money is int8 nano-yuan (docs/decisions/0001-money-unit.md).

CREATE TABLE accounts (
  id text PRIMARY KEY,
  name text NOT NULL,
  balance_nano int8 NOT NULL DEFAULT 0,
  -- Sum of open reservations. The check is the database's own guard of the balance rule:
  -- available (balance - reserved) never goes below zero, so neither does the balance.
  reserved_nano int8 NOT NULL DEFAULT 0,
  realname_verified boolean NOT NULL DEFAULT false,
  status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'disabled')),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT accounts_reserved_within_balance CHECK (reserved_nano >= 0 AND reserved_nano <= balance_nano)
);

CREATE TABLE api_keys (
  id text PRIMARY KEY,
  account_id text NOT NULL REFERENCES accounts (id),
  name text NOT NULL,
  -- sha256 hex of the plaintext key; the plaintext is never stored.
  key_hash text NOT NULL UNIQUE,
  key_prefix text NOT NULL,
  -- JSON array of model names or glob patterns; NULL = every model.
  allowed_models jsonb,
  status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'disabled')),
  expires_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX api_keys_account_id ON api_keys (account_id);

CREATE TABLE ledger (
  id bigserial PRIMARY KEY,
  account_id text NOT NULL REFERENCES accounts (id),
  kind text NOT NULL CHECK (kind IN ('topup', 'adjust', 'usage')),
  amount_nano int8 NOT NULL,
  balance_after_nano int8 NOT NULL,
  reason text,
  request_id text,
  -- clock_timestamp(), not now(): rows are written after the account row is locked, so per account
  -- both id and created_at grow with balance_after's order, and a statement window cuts the chain
  -- at one point (now() is the transaction start and could disagree with the lock order).
  created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX ledger_account_created ON ledger (account_id, created_at, id);

CREATE TABLE instances (
  id text PRIMARY KEY,
  started_at timestamptz NOT NULL DEFAULT now(),
  heartbeat_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE reservations (
  request_id text PRIMARY KEY,
  account_id text NOT NULL REFERENCES accounts (id),
  key_id text NOT NULL,
  model text NOT NULL,
  endpoint text NOT NULL,
  amount_nano int8 NOT NULL CHECK (amount_nano >= 0),
  -- No foreign key: an instance row may be gone (clean shutdown, pruning) while its
  -- reservations wait for recovery.
  instance_id text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX reservations_instance_id ON reservations (instance_id);

CREATE TABLE usage_log (
  request_id text PRIMARY KEY,
  account_id text NOT NULL REFERENCES accounts (id),
  -- No foreign key: a deleted key keeps its history.
  key_id text NOT NULL,
  model text NOT NULL,
  channel_id text,
  endpoint text NOT NULL,
  input_tokens int8 NOT NULL DEFAULT 0,
  cache_hit_tokens int8 NOT NULL DEFAULT 0,
  output_tokens int8 NOT NULL DEFAULT 0,
  reasoning_tokens int8 NOT NULL DEFAULT 0,
  estimated boolean NOT NULL DEFAULT false,
  price_snapshot jsonb,
  peak_applied boolean NOT NULL DEFAULT false,
  campaign_id text,
  cost_nano int8 NOT NULL CHECK (cost_nano >= 0),
  reserved_nano int8 NOT NULL DEFAULT 0,
  capped boolean NOT NULL DEFAULT false,
  status text NOT NULL CHECK (status IN ('ok', 'failed', 'aborted', 'client_aborted', 'recovered')),
  http_status int4,
  latency_ms int4,
  upstream_request_id text,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX usage_log_account_created ON usage_log (account_id, created_at);
CREATE INDEX usage_log_key_created ON usage_log (key_id, created_at);

-- Every change to a key or an account's cached fields appends a row; each instance's key cache
-- polls `WHERE seq > $last` to drop stale entries.
CREATE TABLE change_log (
  seq bigserial PRIMARY KEY,
  kind text NOT NULL CHECK (kind IN ('key', 'account')),
  id text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
