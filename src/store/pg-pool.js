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
 * A connection borrowed from the pool for more than one statement. pg-pool drops its own 'error'
 * listener while a connection is out, and a connection lost then (a server restart,
 * pg_terminate_backend, idle_in_transaction_session_timeout) emits 'error' on the client: with no
 * listener that is an uncaught exception, which in the worker thread ended the thread. Here it is
 * kept, the next statement on the connection fails, and release() makes the pool drop it.
 */
async function borrow(pool) {
  const client = await pool.connect();
  let lost;
  const onError = (err) => {
    lost = err;
  };
  client.on('error', onError);
  const release = (err) => {
    client.off('error', onError);
    client.release(lost ?? err);
  };
  return { client, release };
}

/**
 * COPY holds one connection from its statement to its end: on a pool, it borrows one. The
 * server's own error (pg's DatabaseError, with a severity) leaves the connection usable; anything
 * else (a socket error) may not, and the pool must drop it.
 */
export async function copyOnPool(pool, text, data) {
  const { client, release } = await borrow(pool);
  let broken;
  try {
    await copyFromStdin(client, text, data);
  } catch (err) {
    if (err?.severity === undefined) broken = err;
    throw err;
  } finally {
    release(broken);
  }
}

/**
 * BEGIN on a connection of its own; the returned `end` commits (or rolls back) and gives the
 * connection back. A connection whose ROLLBACK failed is in an unknown state: the pool drops it.
 */
export async function beginOnPool(pool) {
  const { client, release } = await borrow(pool);
  try {
    await client.query('BEGIN');
  } catch (err) {
    release(err?.severity === undefined ? err : undefined);
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
        release(broken);
        throw err;
      }
      release();
      return;
    }
    let broken;
    await client.query('ROLLBACK').catch((e) => (broken = e));
    release(broken);
  };
  return { client, end };
}
