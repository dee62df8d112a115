// glibc's malloc_trim(0), reached through the one native addon (native/malloc-trim.c). After the
// idle-time collection, it gives back the free pages that glibc keeps inside its arenas: V8's
// helper threads free their compile and GC memory there, and free() returns only an arena's top.
// In an idle embedded-store gateway after load that was 30-48 MB (decision 0046).
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

/** Returns the allocator's free pages to the system; true when it gave any back. */
export type AllocatorTrim = () => boolean;

export type AllocatorTrimLoad =
  { trim: AllocatorTrim; reason: null } | { trim: null; reason: string };

const ADDON = fileURLToPath(new URL('../../native/build/malloc-trim.node', import.meta.url));

/** Loads the addon (require caches it); where it is missing or cannot load, says why. */
export function loadAllocatorTrim(): AllocatorTrimLoad {
  if (process.platform !== 'linux') {
    return { trim: null, reason: `glibc only, this is ${process.platform}` };
  }
  try {
    const addon: unknown = createRequire(import.meta.url)(ADDON);
    const trim = (addon as { mallocTrim?: unknown }).mallocTrim;
    if (typeof trim !== 'function') return { trim: null, reason: 'the addon has no mallocTrim' };
    return { trim: trim as AllocatorTrim, reason: null };
  } catch (err) {
    const code = (err as { code?: string }).code;
    const reason =
      code === 'MODULE_NOT_FOUND'
        ? 'native/build/malloc-trim.node is not built (npm run build:native)'
        : `native/build/malloc-trim.node did not load: ${(err as Error).message}`;
    return { trim: null, reason };
  }
}
