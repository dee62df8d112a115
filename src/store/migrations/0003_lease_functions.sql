-- The lease book's two hot statements (docs/decisions/0013-balance-leases.md) as functions, so
-- that their plans are made once per session: planning each call cost PGlite ~2-3 ms of the
-- gateway's thread, more than the rows themselves.

-- Grows a lease: locks the account, takes min(desired, available) when at least `need` is
-- available, and adds it to the holder's lease. The account row is re-read after waiting for a
-- concurrent writer (READ COMMITTED + FOR UPDATE), so two growers cannot take the same money.
-- Returns the account's status (null: no such account) and the lease's new amount (null: none
-- was granted).
CREATE FUNCTION switchyard_grow_lease(p_account text, p_need int8, p_desired int8,
  p_holder text, p_instance text)
RETURNS TABLE (r_status text, r_lease int8)
LANGUAGE plpgsql AS $fn$
BEGIN
  RETURN QUERY
  WITH acct AS (
    SELECT id, status, balance_nano - reserved_nano AS avail FROM accounts
     WHERE id = p_account FOR UPDATE
  ), grant_ AS (
    SELECT id, LEAST(p_desired, avail) AS g FROM acct WHERE status = 'active' AND avail >= p_need
  ), taken AS (
    UPDATE accounts SET reserved_nano = accounts.reserved_nano + grant_.g
      FROM grant_ WHERE accounts.id = grant_.id
    RETURNING grant_.g
  ), l AS (
    INSERT INTO leases (holder_id, instance_id, account_id, amount_nano)
    SELECT p_holder, p_instance, p_account, g FROM taken
    ON CONFLICT (holder_id, account_id)
      DO UPDATE SET amount_nano = leases.amount_nano + EXCLUDED.amount_nano, updated_at = now()
    RETURNING amount_nano
  )
  SELECT (SELECT status FROM acct), (SELECT amount_nano FROM l);
END
$fn$;

-- One write of the lease book, in one call (so one round trip, one implicit transaction, and
-- plans made once per session):
--   1. takes back the open records of settled and released requests (`p_taken`); a settlement
--      whose record a peer already took (and recovered) is left out: it has its outcome;
--   2. locks the accounts charged in id order (the lock order of growth and recovery too);
--   3. settles: locks the holder's leases of the accounts charged, drops the rows of accounts
--      whose lease is gone or short ('lost': a peer presumed the holder dead), writes the usage
--      rows, charges each account the sum of the rows actually written (balance and lease drop
--      together, so available does not move), and appends one ledger row per charge with the
--      balance after it, in the batch's order;
--   4. writes down the requests still open (`p_opens`) as leased reservations.
-- It returns ('settled', request_id, balance_after) and ('lost', account_id, what the holder
-- still has).
CREATE FUNCTION switchyard_write_batch(p_holder text, p_instance text, p_taken jsonb,
  p_settles jsonb, p_opens jsonb)
RETURNS TABLE (r_kind text, r_id text, r_amount int8)
LANGUAGE plpgsql AS $fn$
DECLARE
  v_taken text[] := '{}';
BEGIN
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
      WHERE id IN (SELECT DISTINCT s->>'account_id' FROM jsonb_array_elements(p_settles) s)
      ORDER BY id FOR UPDATE;
    RETURN QUERY
    WITH x AS (
      SELECT * FROM jsonb_to_recordset(p_settles) AS x(ord int4, request_id text, account_id text,
        key_id text, model text, channel_id text, endpoint text, input_tokens int8,
        cache_hit_tokens int8, output_tokens int8, reasoning_tokens int8, estimated boolean,
        price_snapshot jsonb, peak_applied boolean, campaign_id text, cost_nano int8,
        reserved_nano int8, capped boolean, status text, http_status int4, latency_ms int4,
        upstream_request_id text, persisted boolean)
       WHERE NOT x.persisted OR x.request_id = ANY (v_taken)
    ), want AS (
      SELECT account_id, sum(cost_nano)::int8 AS total FROM x GROUP BY account_id
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
        input_tokens, cache_hit_tokens, output_tokens, reasoning_tokens, estimated, price_snapshot,
        peak_applied, campaign_id, cost_nano, reserved_nano, capped, status, http_status,
        latency_ms, upstream_request_id)
      SELECT request_id, account_id, key_id, model, channel_id, endpoint,
        input_tokens, cache_hit_tokens, output_tokens, reasoning_tokens, estimated, price_snapshot,
        peak_applied, campaign_id, cost_nano, reserved_nano, capped, status, http_status,
        latency_ms, upstream_request_id
        FROM x WHERE account_id IN (SELECT account_id FROM judged WHERE ok)
      ON CONFLICT (request_id) DO NOTHING
      RETURNING request_id, account_id, cost_nano
    ), s AS (
      SELECT account_id, sum(cost_nano)::int8 AS total FROM u GROUP BY account_id
    ), l AS (
      UPDATE leases SET amount_nano = leases.amount_nano - s.total, updated_at = now()
        FROM s WHERE leases.holder_id = p_holder AND leases.account_id = s.account_id AND s.total > 0
    ), a AS (
      UPDATE accounts SET balance_nano = accounts.balance_nano - s.total,
                          reserved_nano = accounts.reserved_nano - s.total
        FROM s WHERE accounts.id = s.account_id
      RETURNING accounts.id, accounts.balance_nano
    ), r AS (
      SELECT x.ord, x.request_id, x.account_id, x.cost_nano,
             a.balance_nano + coalesce(sum(x.cost_nano) OVER (PARTITION BY x.account_id
               ORDER BY x.ord DESC ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)::int8
               AS balance_after
        FROM x JOIN u ON u.request_id = x.request_id JOIN a ON a.id = x.account_id
    ), led AS (
      INSERT INTO ledger (account_id, kind, amount_nano, balance_after_nano, request_id)
      SELECT account_id, 'usage', -cost_nano, balance_after, request_id FROM r
       WHERE cost_nano > 0 ORDER BY ord
    )
    SELECT 'settled' AS kind, request_id AS id, balance_after AS amount FROM r
    UNION ALL
    SELECT 'lost', account_id, has FROM judged WHERE NOT ok;
  END IF;

  IF jsonb_array_length(p_opens) > 0 THEN
    INSERT INTO reservations (request_id, account_id, key_id, model, endpoint, amount_nano,
      instance_id, leased)
    SELECT o.request_id, o.account_id, o.key_id, o.model, o.endpoint, o.amount_nano,
           p_instance, true
      FROM jsonb_to_recordset(p_opens) AS o(request_id text, account_id text, key_id text,
           model text, endpoint text, amount_nano int8)
    ON CONFLICT (request_id) DO NOTHING;
  END IF;
END
$fn$;
