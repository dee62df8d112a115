-- The COPY write of settlements on Postgres too (docs/decisions/0045). 0008 stamped a COPY
-- write's usage and ledger rows with now(), the transaction's start: in charge order on the
-- embedded store, which has one session, but not where several sessions lock one account (other
-- instances, an admin top-up). A write that began first and locked second would date its ledger
-- row before a row whose balance it follows, and a statement window cut between the two would not
-- reconcile (0001's ledger comment, 0007).
--
-- Now the writer locks first and takes the time under the locks, in a statement of its own
-- (switchyard_lock_for_copy), then COPYs the usage rows with that time in created_at, then
-- settles with the same time for the ledger rows (the 12-argument switchyard_copy_settle below,
-- 0008's with p_at in place of now()). 0008's function stays: an earlier release may run against
-- this schema (migrate.ts leaves newer migrations alone), and on the embedded store it calls it.

-- Locks what the write will change, in the order the other writers lock it: first the open
-- records it takes back (switchyard_write_batch deletes them before it locks accounts, and
-- recovery locks them with SKIP LOCKED before it locks accounts, so a writer that held an account
-- while it waited for an open record recovery held would deadlock with it), then the accounts in
-- id order. Returns the time after the locks as UTC text with microseconds, the same whatever the
-- session's DateStyle and TimeZone, so the writer sends it back exactly (a JavaScript Date keeps
-- milliseconds only).
CREATE FUNCTION switchyard_lock_for_copy(p_accounts text[], p_taken text[])
RETURNS text
LANGUAGE plpgsql AS $fn$
BEGIN
  PERFORM 1 FROM reservations WHERE request_id = ANY (p_taken) AND leased
    ORDER BY request_id FOR UPDATE;
  PERFORM 1 FROM accounts WHERE id = ANY (p_accounts) ORDER BY id FOR UPDATE;
  RETURN to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') || '+00';
END
$fn$;

-- 0008's switchyard_copy_settle with the write's time (p_at, from switchyard_lock_for_copy) for
-- the ledger rows, the time the usage rows were copied with.
CREATE FUNCTION switchyard_copy_settle(p_holder text, p_instance text, p_snapshots jsonb,
  p_taken jsonb, p_ids text[], p_persisted text[], p_opens jsonb, p_accounts text[],
  p_totals int8[], p_counts int8[], p_only text[], p_at timestamptz)
RETURNS TABLE (r_kind text, r_id text, r_amount int8)
LANGUAGE plpgsql AS $fn$
DECLARE
  v_taken text[] := '{}';
  v_gone text[] := '{}';
  v_accounts text[] := p_accounts;
  v_totals int8[] := p_totals;
  v_counts int8[] := p_counts;
  v_only text[] := p_only;
  -- Accounts whose rows go: unknown, or their lease short (v_lost, with what each holds).
  v_bad text[] := '{}';
  v_lost text[] := '{}';
  v_has int8[] := '{}';
BEGIN
  IF jsonb_array_length(p_snapshots) > 0 THEN
    INSERT INTO price_snapshots (id, snapshot)
    SELECT x->>0, x->1 FROM jsonb_array_elements(p_snapshots) x
    ON CONFLICT (id) DO NOTHING;
  END IF;
  PERFORM 1 FROM accounts WHERE id = ANY (p_accounts) ORDER BY id FOR UPDATE;

  IF jsonb_array_length(p_taken) > 0 THEN
    WITH d AS (
      DELETE FROM reservations
       WHERE request_id IN (SELECT jsonb_array_elements_text(p_taken)) AND leased
      RETURNING request_id
    )
    SELECT coalesce(array_agg(d.request_id), '{}') INTO v_taken FROM d;
  END IF;

  IF cardinality(p_persisted) > 0 THEN
    WITH d AS (
      DELETE FROM usage_log
       WHERE request_id = ANY (p_persisted) AND NOT request_id = ANY (v_taken)
      RETURNING request_id
    )
    SELECT coalesce(array_agg(d.request_id), '{}') INTO v_gone FROM d;
  END IF;

  -- Sums taken again from the rows that stayed (the rows are this transaction's own).
  IF cardinality(v_gone) > 0 THEN
    SELECT coalesce(array_agg(g.account_id), '{}'), coalesce(array_agg(g.total), '{}'),
           coalesce(array_agg(g.n), '{}'), coalesce(array_agg(g.only_request), '{}')
      INTO v_accounts, v_totals, v_counts, v_only
      FROM (SELECT u.account_id, sum(u.cost_nano)::int8 AS total,
                   count(*) FILTER (WHERE u.cost_nano > 0) AS n,
                   min(u.request_id) FILTER (WHERE u.cost_nano > 0) AS only_request
              FROM usage_log u WHERE u.request_id = ANY (p_ids)
             GROUP BY u.account_id) g;
  END IF;

  PERFORM 1 FROM leases WHERE holder_id = p_holder AND account_id = ANY (v_accounts)
    ORDER BY account_id FOR UPDATE;
  SELECT coalesce(array_agg(g.account_id), '{}'),
         coalesce(array_agg(g.account_id) FILTER (WHERE g.known), '{}'),
         coalesce(array_agg(g.has) FILTER (WHERE g.known), '{}')
    INTO v_bad, v_lost, v_has
    FROM (SELECT c.account_id, coalesce(l.amount_nano, 0) AS has,
                 EXISTS (SELECT 1 FROM accounts ac WHERE ac.id = c.account_id) AS known,
                 coalesce(l.amount_nano, 0) >= c.total AS ok
            FROM unnest(v_accounts, v_totals) AS c(account_id, total)
            LEFT JOIN leases l ON l.holder_id = p_holder AND l.account_id = c.account_id) g
   WHERE NOT (g.known AND g.ok);
  IF cardinality(v_bad) > 0 THEN
    WITH d AS (
      DELETE FROM usage_log WHERE request_id = ANY (p_ids) AND account_id = ANY (v_bad)
      RETURNING request_id
    )
    SELECT v_gone || coalesce(array_agg(d.request_id), '{}') INTO v_gone FROM d;
  END IF;

  RETURN QUERY
  WITH s AS (
    SELECT c.account_id, c.total, c.n, c.only_request
      FROM unnest(v_accounts, v_totals, v_counts, v_only) AS c(account_id, total, n, only_request)
     WHERE NOT c.account_id = ANY (v_bad)
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
           CASE WHEN s.n > 1 THEN s.n || ' requests' END, p_at
      FROM a JOIN s ON s.account_id = a.id WHERE s.total > 0
  )
  SELECT 'unsettled' AS kind, x AS id, 0::int8 AS amount FROM unnest(v_gone) x
  UNION ALL
  SELECT 'balance', a.id, a.balance_nano FROM a
  UNION ALL
  SELECT 'lost', x.account_id, x.has FROM unnest(v_lost, v_has) AS x(account_id, has);

  IF jsonb_array_length(p_opens) > 0 THEN
    INSERT INTO reservations (request_id, account_id, key_id, model, endpoint, amount_nano,
      instance_id, leased, client_request_id)
    SELECT o->>0, o->>1, o->>2, o->>3, o->>4, (o->>5)::int8, p_instance, true, o->>6
      FROM jsonb_array_elements(p_opens) o
    ON CONFLICT (request_id) DO NOTHING;
  END IF;
END
$fn$;
