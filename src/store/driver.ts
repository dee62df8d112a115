// The tiny interface the SQL store runs on: the same SQL text goes to `pg` and to PGlite.
// Parameters: bigint and Date are passed as text (int8 and timestamptz parse it exactly).

export interface Queryable {
  /** One statement with $n parameters; int8 columns come back as bigint. */
  query<T>(text: string, params?: readonly unknown[]): Promise<T[]>;
  /** Several statements, no parameters (migrations). */
  exec(text: string): Promise<void>;
  /**
   * Runs `COPY … FROM '/dev/blob'` with `data` as its input (text format). PGlite has it; null
   * on pg, which would need another package for COPY FROM (decision 0038).
   */
  readonly copyFrom: ((text: string, data: string) => Promise<void>) | null;
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
