// Load + validate + compile a config directory in one call: what `validate`, `compile`, `serve`
// and the hot reloader share.
import { compileConfig, type CompileMode, type CompileResult } from './compile.ts';
import { loadConfigDir } from './load.ts';

export async function compileDir(
  dir: string,
  mode: CompileMode,
  env: Readonly<Record<string, string | undefined>> = process.env,
): Promise<CompileResult> {
  return compileConfig(await loadConfigDir(dir), { env, mode });
}
