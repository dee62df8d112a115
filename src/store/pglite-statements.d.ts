// Types of pglite-statements.js (plain JavaScript so the PGlite worker thread loads no TypeScript).
import type { PGlite } from '@electric-sql/pglite';

export const MAX_PREPARED: number;

/** A PGlite session's queries as named prepared statements, one protocol pass a call. */
export class PreparedStatements {
  constructor(db: PGlite);
  /** How many texts are prepared now. */
  readonly size: number;
  /** The rows of `text` run with `params`, as `db.query(text, params)` returns them. */
  query(text: string, params: readonly unknown[]): Promise<Record<string, unknown>[]>;
}
