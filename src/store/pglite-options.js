// PGlite's options, shared by the worker thread (pglite-worker.js), the in-process driver
// (pglite-driver.ts) and the first-start child (pglite-init.ts). Plain JavaScript so the worker
// thread loads no TypeScript (decision 0023); its types are in pglite-options.d.ts.
import { PGlite } from '@electric-sql/pglite';

const INT8_OID = 20;

/**
 * PGlite parses int8 to a JS number by default, which loses nano-yuan above 2^53 (9e6 ¥); int8
 * comes back as bigint instead. shared_buffers is 16MB, not Postgres' 128MB: PGlite's buffers live in the WASM heap, and the
 * default's touched pages were ~120 MB of the gateway's RSS (330 → 209 MB for a process with
 * the store open) with no measurable change in CPU per settlement; the OS page cache sits below.
 */
export function pgliteOptions(dataDir) {
  const parsers = { [INT8_OID]: (text) => BigInt(text) };
  const startParams = [...PGlite.defaultStartParams, '-c', 'shared_buffers=16MB'];
  return dataDir === null ? { parsers, startParams } : { dataDir, parsers, startParams };
}
