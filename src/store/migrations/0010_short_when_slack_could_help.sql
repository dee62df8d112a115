-- The short mark (0009, decision 0044) takes back every other holder's idle slack on the account
-- for a minute. It is only worth that when the slack could have met the refused need: a grow or a
-- negative adjustment larger than the whole balance is refused whoever gives slack back, so it no
-- longer marks the account (a client sending requests too large for its balance emptied every
-- instance's idle slack, again and again). And an account marked in the last second is not marked
-- again: a burst of refusals wrote one new row version each, where one mark says the same.

-- As in 0009, with the two conditions on the mark.
CREATE OR REPLACE FUNCTION switchyard_grow_lease(p_account text, p_need int8, p_desired int8,
  p_holder text, p_instance text)
RETURNS TABLE (r_status text, r_lease int8)
LANGUAGE plpgsql AS $fn$
BEGIN
  RETURN QUERY
  WITH acct AS (
    SELECT id, status, balance_nano, short_at, balance_nano - reserved_nano AS avail FROM accounts
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
       AND p_need <= acct.balance_nano
       AND (acct.short_at IS NULL OR acct.short_at < clock_timestamp() - interval '1 second')
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
