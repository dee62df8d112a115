// Types of pg-pool.js (plain JavaScript so the Postgres worker thread loads no TypeScript).
import type pg from 'pg';

/** A pool whose int8 columns come back as bigint; an idle connection's failure only warns. */
export function createPgPool(url: string, max: number): pg.Pool;

/** `COPY … FROM STDIN` (`text`) with `data` as its input, on a connection borrowed for it. */
export function copyOnPool(pool: pg.Pool, text: string, data: string): Promise<void>;

/** BEGIN on a connection of its own; `end(true)` commits, `end(false)` rolls back, both release. */
export function beginOnPool(
  pool: pg.Pool,
): Promise<{ client: pg.PoolClient; end: (commit: boolean) => Promise<void> }>;
