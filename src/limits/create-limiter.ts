// Builds the gateway's limiter from configuration: in memory for one process when no Redis URL
// is given, otherwise Redis shared by every process behind the unreachable policy.
import type { LimiterState } from './limiter.ts';
import { MemoryLimiter } from './memory-limiter.ts';
import { connectLimiterRedis } from './redis-client.ts';
import type { RedisClientOptions } from './redis-client.ts';
import { RedisLimiter } from './redis-limiter.ts';
import { ResilientLimiter } from './resilient-limiter.ts';
import type { GatewayLimiter, StateListener, UnreachablePolicy } from './resilient-limiter.ts';

export type CreateLimiterOptions = RedisClientOptions & {
  redisUrl: string | null;
  onUnreachable: UnreachablePolicy;
  /** Called on each change between 'ok' and 'degraded', with the error behind a degradation. */
  onStateChange?: StateListener;
  /** Redis key prefix, default 'switchyard:'. */
  keyPrefix?: string;
  /** RPM window, default 60,000 ms (tests shorten it). */
  windowMs?: number;
  /** Redis only: how long a block of hits or slots may be handed out locally (0: none). */
  leaseMs?: number;
};

/** The memory limiter never degrades: its state is always 'ok'. */
class LocalLimiter extends MemoryLimiter implements GatewayLimiter {
  state(): LimiterState {
    return 'ok';
  }
}

export function createLimiter(options: CreateLimiterOptions): GatewayLimiter {
  const windowMs = options.windowMs ?? 60_000;
  if (options.redisUrl === null) return new LocalLimiter({ windowMs });
  const redis = new RedisLimiter({
    client: connectLimiterRedis(options.redisUrl, options),
    keyPrefix: options.keyPrefix ?? 'switchyard:',
    windowMs,
    ownsClient: true,
    ...(options.leaseMs === undefined ? {} : { leaseMs: options.leaseMs }),
  });
  return new ResilientLimiter({
    redis,
    onUnreachable: options.onUnreachable,
    onStateChange: options.onStateChange ?? null,
    windowMs,
  });
}
