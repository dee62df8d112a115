// glibc's malloc_trim(0), reached through a native addon (native/malloc-trim.c). After the
// idle-time collection, it gives back the free pages that glibc keeps inside its arenas: V8's
// helper threads free their compile and GC memory there, and free() returns only an arena's top.
// In an idle embedded-store gateway after load that was 30-48 MB (decision 0046).
import { loadAddonFunction } from '../native/load-addon.ts';

/** Returns the allocator's free pages to the system; true when it gave any back. */
export type AllocatorTrim = () => boolean;

export type AllocatorTrimLoad =
  { trim: AllocatorTrim; reason: null } | { trim: null; reason: string };

/** Loads the addon; where it is missing or cannot load, says why. */
export function loadAllocatorTrim(): AllocatorTrimLoad {
  const load = loadAddonFunction<AllocatorTrim>('malloc-trim', 'mallocTrim');
  return load.fn === null ? { trim: null, reason: load.reason } : { trim: load.fn, reason: null };
}
