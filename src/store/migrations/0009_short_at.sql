-- A holder keeps an idle lease's slack while the account has room for others (decision 0044):
-- it asks, every half second or so, for the account's unleased balance and whether a grow was
-- refused for want of money since it last looked. `short_at` is that mark: the last time a grow
-- found the account active but its available balance below what was needed, or a negative
-- adjustment was refused for the same reason (src/store/accounts.ts). A holder keeping slack that
-- sees it gives the slack back, so a refusal on one instance frees what another keeps idle within
-- one look (before: the idle return, 2 s).

ALTER TABLE accounts ADD COLUMN short_at timestamptz;

-- As in 0003, and a refusal for want of money marks the account (its row is locked already;
-- the mark and a grant never both happen, so the row is updated at most once per statement).
CREATE OR REPLACE FUNCTION switchyard_grow_lease(p_account text, p_need int8, p_desired int8,
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
  ), short AS (
    UPDATE accounts SET short_at = clock_timestamp()
      FROM acct WHERE accounts.id = acct.id AND acct.status = 'active' AND acct.avail < p_need
    RETURNING 1
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
