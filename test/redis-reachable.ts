// Whether the Redis the tests use answers, decided once per test file: in CI it must (a missing
// service fails the run), elsewhere the tests that need it skip with a visible notice.
import { Redis } from 'ioredis';

/** Whether Redis at `url` answers PING within a second. */
export async function redisAnswers(url: string): Promise<boolean> {
  const probe = new Redis(url, {
    lazyConnect: true,
    connectTimeout: 1000,
    retryStrategy: () => null,
  });
  probe.on('error', () => {});
  try {
    await probe.connect();
    return (await probe.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    probe.disconnect();
  }
}

/**
 * True when Redis at `url` answers PING. False only outside CI, after warning that `skipped`
 * (what the caller leaves untested) is skipped; in CI an unreachable Redis throws.
 */
export async function redisForTests(url: string, who: string, skipped: string): Promise<boolean> {
  if (await redisAnswers(url)) return true;
  if (process.env.CI) throw new Error(`Redis is required in CI and ${url} is unreachable`);
  console.warn(`[${who}] Redis at ${url} is unreachable: ${skipped}`);
  return false;
}
