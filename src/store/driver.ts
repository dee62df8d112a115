// The tiny interface the SQL store runs on: the same SQL text goes to `pg` and to PGlite.
// Parameters: bigint and Date are passed as text (int8 and timestamptz parse it exactly).

export interface Queryable {
  /** One statement with $n parameters; int8 columns come back as bigint. */
  query<T>(text: string, params?: readonly unknown[]): Promise<T[]>;
  /** Several statements, no parameters (migrations). */
  exec(text: string): Promise<void>;
  /**
   * Runs `COPY <into> FROM …` with `data` as its input (text format); `into` is a table and its
   * column list. PGlite reads the data as a blob (decision 0038), pg as STDIN (pg-copy.js,
   * decision 0045). Null where a driver has no COPY.
   */
  readonly copyFrom: ((into: string, data: string) => Promise<void>) | null;
}

export interface Driver extends Queryable {
  readonly kind: 'pg' | 'pglite';
  /** Runs fn inside BEGIN … COMMIT on one connection; rolls back when fn throws. */
  transaction<R>(fn: (tx: Queryable) => Promise<R>): Promise<R>;
  close(): Promise<void>;
}

/** Turns bigint and Date parameters into text both drivers send unchanged. */
export function toParams(params: readonly unknown[] | undefined): unknown[] {
  if (params === undefined) return [];
  return params.map((p) => {
    if (typeof p === 'bigint') return p.toString();
    if (p instanceof Date) return p.toISOString();
    return p;
  });
}

/**
 * Runs `fn` on `tx`, a transaction already begun, then ends it: `end(true)` commits; when `fn`
 * throws, `end(false)` rolls back (its own failure is not the caller's error) and fn's error is
 * rethrown.
 */
export async function withinTransaction<R>(
  tx: Queryable,
  end: (commit: boolean) => Promise<void>,
  fn: (tx: Queryable) => Promise<R>,
): Promise<R> {
  let result: R;
  try {
    result = await fn(tx);
  } catch (err) {
    await end(false).catch(() => undefined);
    throw err;
  }
  await end(true);
  return result;
}
