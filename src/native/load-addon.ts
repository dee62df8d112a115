// Loads one function of a native addon from native/build/ (built by scripts/build-native.js on
// `npm install`). Every addon is optional: where it is missing or cannot load, the caller gets
// the reason and runs without it (decisions 0046 and 0068).
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

export type AddonLoad<T> = { fn: T; reason: null } | { fn: null; reason: string };

/** `exportName` of native/build/<name>.node (require caches the module); else why not. */
export function loadAddonFunction<T>(name: string, exportName: string): AddonLoad<T> {
  if (process.platform !== 'linux') {
    return { fn: null, reason: `built on Linux only, this is ${process.platform}` };
  }
  const file = `native/build/${name}.node`;
  try {
    const path = fileURLToPath(new URL(`../../${file}`, import.meta.url));
    const addon: unknown = createRequire(import.meta.url)(path);
    const fn = (addon as Record<string, unknown>)[exportName];
    if (typeof fn !== 'function') return { fn: null, reason: `${file} has no ${exportName}` };
    return { fn: fn as T, reason: null };
  } catch (err) {
    const code = (err as { code?: string }).code;
    const reason =
      code === 'MODULE_NOT_FOUND'
        ? `${file} is not built (npm run build:native)`
        : `${file} did not load: ${(err as Error).message}`;
    return { fn: null, reason };
  }
}
