// The node-postgres pool of the Postgres store, shared by the in-thread driver (pg-driver.ts) and
// the worker thread (pg-worker.js): int8 parses to bigint through a type parser on this pool
// only (global pg parsers stay untouched). Plain JavaScript so the worker thread loads no
// TypeScript (decisions 0023, 0053); its types are in pg-pool.d.ts.
import pg from 'pg';
import { copyFromStdin } from './pg-copy.js';

const INT8_OID = 20;

const types = {
  getTypeParser(oid, format) {
    if (oid === INT8_OID) return (text) => BigInt(text);
    return pg.types.getTypeParser(oid, format ?? 'text');
  },
};

export function createPgPool(url, max) {
  const pool = new pg.Pool({ connectionString: url, max, types });
  // An idle client losing its connection must not crash the process; the next query reconnects.
  pool.on('error', (err) =>
    console.warn(`[store] idle postgres connection failed: ${err.message}`),
  );
  return pool;
}

/**
 * COPY holds one connection from its statement to its end: on a pool, it borrows one. The
 * server's own error (pg's DatabaseError, with a severity) leaves the connection usable; anything
 * else (a socket error) may not, and the pool must drop it.
 */
export async function copyOnPool(pool, text, data) {
  const one = await pool.connect();
  let broken;
  try {
    await copyFromStdin(one, text, data);
  } catch (err) {
    if (err?.severity === undefined) broken = err;
    throw err;
  } finally {
    one.release(broken);
  }
}

/**
 * BEGIN on a connection of its own; the returned `end` commits (or rolls back) and gives the
 * connection back. A connection whose ROLLBACK failed is in an unknown state: the pool drops it.
 */
export async function beginOnPool(pool) {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
  } catch (err) {
    client.release(err?.severity === undefined ? err : undefined);
    throw err;
  }
  let ended = false;
  const end = async (commit) => {
    if (ended) return;
    ended = true;
    if (commit) {
      try {
        await client.query('COMMIT');
      } catch (err) {
        let broken;
        await client.query('ROLLBACK').catch((e) => (broken = e));
        client.release(broken);
        throw err;
      }
      client.release();
      return;
    }
    let broken;
    await client.query('ROLLBACK').catch((e) => (broken = e));
    client.release(broken);
  };
  return { client, end };
}
