// Runs the mock upstream as its own process (the benchmark's upstream):
//   npx node test/mock-upstream/main.ts --port 8787 [--host 127.0.0.1] [--keys k1,k2] [--no-record]

import { MOCK_DEFAULT_KEY, startMockUpstream, type MockUpstream } from './server.ts';

export async function runMockUpstreamCli(
  argv: string[] = process.argv.slice(2),
): Promise<MockUpstream> {
  const arg = (name: string): string | undefined => {
    const i = argv.indexOf(name);
    return i === -1 ? undefined : argv[i + 1];
  };
  const port = Number(arg('--port') ?? '8787');
  const keys = (arg('--keys') ?? MOCK_DEFAULT_KEY).split(',').filter((k) => k.length > 0);
  const mock = await startMockUpstream({
    port,
    host: arg('--host') ?? '127.0.0.1',
    keys,
    record: !argv.includes('--no-record'),
  });
  process.stdout.write(`mock upstream listening on ${mock.url} (keys: ${keys.join(',')})\n`);
  const stop = (): void => {
    void mock.close().then(() => process.exit(0));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  return mock;
}

if (import.meta.main) await runMockUpstreamCli();
