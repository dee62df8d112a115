// Runs load + validate + compile in a worker thread so a reload of a large config (5,000 models:
// ~300 ms of CPU) never stalls request handling on the main thread. The table comes back by
// structured clone (Maps, Sets, bigints and typed arrays survive it) and is frozen again there.
import { parentPort } from 'node:worker_threads';
import { compileDir } from './source.ts';
import type { CompileMode } from './compile.ts';

interface CompileRequest {
  id: number;
  dir: string;
  mode: CompileMode;
  env: Record<string, string | undefined>;
}

parentPort?.on('message', (req: CompileRequest) => {
  compileDir(req.dir, req.mode, req.env).then(
    (result) => parentPort?.postMessage({ id: req.id, result }),
    (err: unknown) => parentPort?.postMessage({ id: req.id, error: err instanceof Error ? err.message : String(err) }),
  );
});
