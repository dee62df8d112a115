-- A caller's request id is kept, and the usage log keys on the gateway's own (docs/decisions/0036).
-- A valid incoming x-request-id stays the request's id in its answer, logs and trace, but it was
-- also the usage row's primary key: a caller who sent the same id twice got the second answer
-- and no usage row for it (ON CONFLICT DO NOTHING), so it was never charged. The gateway now
-- writes every request under an id of its own and keeps the caller's beside it, here.
--
-- A settle row's position 23 and an open row's position 6 carry the caller's id (or null). An
-- instance not yet upgraded sends rows without them, which read as null.
ALTER TABLE usage_log ADD COLUMN client_request_id text;
ALTER TABLE reservations ADD COLUMN client_request_id text;
-- Only rows that have one: most requests bring no id of their own, and they pay nothing for it.
CREATE INDEX usage_log_client_request_id ON usage_log (client_request_id, created_at)
  WHERE client_request_id IS NOT NULL;

CREATE OR REPLACE FUNCTION switchyard_write_batch(p_holder text, p_instance text, p_taken jsonb,
  p_settles jsonb, p_opens jsonb, p_snapshots jsonb)
RETURNS TABLE (r_kind text, r_id text, r_amount int8)
LANGUAGE plpgsql AS $fn$
DECLARE
  v_taken text[] := '{}';
  -- One time for the write's usage rows and its ledger rows, taken under the accounts' locks (so
  -- ledger order per account is still balance order): the usage rows had the transaction's start
  -- (now()) and the ledger rows a clock_timestamp() a few ms later, so a period ending between
  -- the two counted the rows in the log but not their charge in the statement (session 21).
  v_at timestamptz;
BEGIN
  IF jsonb_array_length(p_snapshots) > 0 THEN
    INSERT INTO price_snapshots (id, snapshot)
    SELECT s->>0, s->1 FROM jsonb_array_elements(p_snapshots) s
    ON CONFLICT (id) DO NOTHING;
  END IF;

  IF jsonb_array_length(p_taken) > 0 THEN
    WITH d AS (
      DELETE FROM reservations
       WHERE request_id IN (SELECT jsonb_array_elements_text(p_taken)) AND leased
      RETURNING request_id
    )
    SELECT coalesce(array_agg(d.request_id), '{}') INTO v_taken FROM d;
  END IF;

  IF jsonb_array_length(p_settles) > 0 THEN
    PERFORM 1 FROM accounts
      WHERE id IN (SELECT DISTINCT s->>1 FROM jsonb_array_elements(p_settles) s)
      ORDER BY id FOR UPDATE;
    v_at := clock_timestamp();
    RETURN QUERY
    WITH x AS (
      SELECT r->>0 AS request_id, r->>1 AS account_id, r->>2 AS key_id, r->>3 AS model,
             r->>4 AS channel_id, r->>5 AS endpoint, (r->>6)::int8 AS input_tokens,
             (r->>7)::int8 AS cache_hit_tokens, (r->>8)::int8 AS output_tokens,
             (r->>9)::int8 AS reasoning_tokens, (r->>10)::boolean AS estimated,
             r->>11 AS price_snapshot_id, (r->>22)::int8 AS priced_at_ms,
             (r->>12)::boolean AS peak_applied,
             r->>13 AS campaign_id,
             (r->>14)::int8 AS cost_nano, (r->>15)::int8 AS reserved_nano,
             (r->>16)::boolean AS capped, r->>17 AS status, (r->>18)::int4 AS http_status,
             (r->>19)::int4 AS latency_ms, r->>20 AS upstream_request_id,
             r->>23 AS client_request_id
        FROM jsonb_array_elements(p_settles) r
       WHERE NOT (r->>21)::boolean OR r->>0 = ANY (v_taken)
    ), want AS (
      -- Only accounts that exist: the usage rows' account reference, checked once per account.
      SELECT g.account_id, g.total
        FROM (SELECT account_id, sum(cost_nano)::int8 AS total FROM x GROUP BY account_id) g
       WHERE EXISTS (SELECT 1 FROM accounts ac WHERE ac.id = g.account_id)
    ), held AS (
      SELECT l.account_id, l.amount_nano FROM leases l
       WHERE l.holder_id = p_holder AND l.account_id IN (SELECT account_id FROM want)
         FOR UPDATE OF l
    ), judged AS (
      SELECT w.account_id, coalesce(h.amount_nano, 0) AS has,
             (w.total = 0 OR h.amount_nano >= w.total) AS ok
        FROM want w LEFT JOIN held h ON h.account_id = w.account_id
    ), u AS (
      INSERT INTO usage_log (request_id, account_id, key_id, model, channel_id, endpoint,
        input_tokens, cache_hit_tokens, output_tokens, reasoning_tokens, estimated,
        price_snapshot_id, priced_at_ms, peak_applied, campaign_id, cost_nano, reserved_nano, capped,
        status, http_status, latency_ms, upstream_request_id, client_request_id, created_at)
      SELECT request_id, account_id, key_id, model, channel_id, endpoint,
        input_tokens, cache_hit_tokens, output_tokens, reasoning_tokens, estimated,
        price_snapshot_id, priced_at_ms, peak_applied, campaign_id, cost_nano, reserved_nano, capped,
        status, http_status, latency_ms, upstream_request_id, client_request_id, v_at
        FROM x WHERE account_id IN (SELECT account_id FROM judged WHERE ok)
      ON CONFLICT (request_id) DO NOTHING
      RETURNING request_id, account_id, cost_nano
    ), s AS (
      SELECT account_id, sum(cost_nano)::int8 AS total, count(*) FILTER (WHERE cost_nano > 0) AS n,
             min(request_id) FILTER (WHERE cost_nano > 0) AS only_request
        FROM u GROUP BY account_id
    ), l AS (
      UPDATE leases SET amount_nano = leases.amount_nano - s.total, updated_at = now()
        FROM s WHERE leases.holder_id = p_holder AND leases.account_id = s.account_id AND s.total > 0
    ), a AS (
      UPDATE accounts SET balance_nano = accounts.balance_nano - s.total,
                          reserved_nano = accounts.reserved_nano - s.total
        FROM s WHERE accounts.id = s.account_id
      RETURNING accounts.id, accounts.balance_nano
    ), led AS (
      INSERT INTO ledger (account_id, kind, amount_nano, balance_after_nano, request_id, reason,
        created_at)
      SELECT a.id, 'usage', -s.total, a.balance_nano,
             CASE WHEN s.n = 1 THEN s.only_request END,
             CASE WHEN s.n > 1 THEN s.n || ' requests' END, v_at
        FROM a JOIN s ON s.account_id = a.id WHERE s.total > 0
    )
    -- Walked only when some settlement was not written (nearly never): a second pass over the
    -- batch cost 0.6-1.0 µs a row on PGlite (session 19).
    SELECT 'unsettled' AS kind, r->>0 AS id, 0::int8 AS amount
      FROM jsonb_array_elements(p_settles) r
     WHERE (SELECT count(*) FROM u) < jsonb_array_length(p_settles)
       AND r->>0 NOT IN (SELECT u.request_id FROM u)
    UNION ALL
    SELECT 'balance', a.id, a.balance_nano FROM a
    UNION ALL
    SELECT 'lost', account_id, has FROM judged WHERE NOT ok;
  END IF;

  IF jsonb_array_length(p_opens) > 0 THEN
    INSERT INTO reservations (request_id, account_id, key_id, model, endpoint, amount_nano,
      instance_id, leased, client_request_id)
    SELECT o->>0, o->>1, o->>2, o->>3, o->>4, (o->>5)::int8, p_instance, true, o->>6
      FROM jsonb_array_elements(p_opens) o
    ON CONFLICT (request_id) DO NOTHING;
  END IF;
END
$fn$;
