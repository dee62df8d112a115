// Types of pglite-options.js (plain JavaScript so the PGlite worker thread loads no TypeScript).
import type { PGliteOptions } from '@electric-sql/pglite';

/** dataDir null → in memory. */
export function pgliteOptions(dataDir: string | null): PGliteOptions;
