// Text that comes from outside the gateway (an upstream's answer id) as Postgres can keep it.
// Postgres text holds no NUL, and jsonb refuses a lone surrogate's escape: one such id in a
// settlement made every write of its batch fail, and the lease book retried that batch forever,
// so no later settlement of the instance was written either (session 21).

/** Longer ids are cut: the usage row keeps an id to look the answer up by, not a payload. */
export const MAX_STORED_ID = 200;

/** NULs dropped, lone surrogates made U+FFFD, at most `max` UTF-16 units. */
export function storableText(value: string | null, max = MAX_STORED_ID): string | null {
  if (value === null) return null;
  // Nearly every id is short, well formed and NUL-free: returned as it is.
  if (value.length <= max && value.isWellFormed() && !value.includes('\0')) return value;
  return value.replaceAll('\0', '').slice(0, max).toWellFormed();
}
