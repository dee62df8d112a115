// How the benchmarks start a gateway (as `npm start` serves it) and where they find Postgres and
// Redis for the Postgres+Redis gateway: one place for bench:run, bench:ab and bench:cpu.

export const PG_URL =
  process.env.SWITCHYARD_BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const REDIS_URL = process.env.SWITCHYARD_BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
/** The V8 flags and environment `npm start` serves with (package.json; decisions 0016, 0018). */
export const GATEWAY_NODE_FLAGS = ['--max-semi-space-size=16'];
export const GATEWAY_ENV = { GLIBC_TUNABLES: 'glibc.malloc.trim_threshold=131072' };
