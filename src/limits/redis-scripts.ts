// The Lua scripts behind redis-limiter.ts. Each runs atomically on the server and reads the
// server's clock (TIME), so gateway processes with skewed clocks still share one exact window.
import type { Redis } from 'ioredis';

// Server time in epoch ms. Scripts that call TIME and then write are replicated by effects, the
// only mode since Redis 7 and the default since 5.
const NOW = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`;

// The RPM check on KEYS[1] (bucket zset: score = admit time, member unique per hit) with ARGV
// limit, windowMs, member: counts the hit when under the limit and leaves `allowed` (0|1),
// `remaining` and `reset` (ms until the oldest hit leaves the window) for the script to return.
const RPM_CHECK = `local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
local count = redis.call('ZCARD', key)
local allowed, remaining, reset = 0, 0, window
if count < limit then
  redis.call('ZADD', key, now, ARGV[3])
  redis.call('PEXPIRE', key, window)
  allowed, remaining = 1, limit - count - 1
end
if allowed == 1 or count > 0 then
  local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  reset = tonumber(oldest[2]) + window - now
end
`;

// Takes a slot of the channel zset `slots` (score = expiry, member = lease token) for `ttl` ms
// under `capacity`, as `expiry` (-1: full). Expired entries (a process that died holding them)
// are purged first, so slots reclaim themselves.
const SLOT_TAKE = `redis.call('ZREMRANGEBYSCORE', slots, '-inf', now)
local expiry = -1
if redis.call('ZCARD', slots) < capacity then
  expiry = now + ttl
  redis.call('ZADD', slots, expiry, token)
  if redis.call('PTTL', slots) < ttl then
    redis.call('PEXPIRE', slots, ttl)
  end
end
`;

/** RPM_CHECK alone. Returns {allowed 0|1, remaining, resetMs}. */
const HIT_RPM = `${NOW}${RPM_CHECK}return {allowed, remaining, reset}
`;

/**
 * KEYS[1] channel zset. ARGV capacity, ttlMs, token. Returns the expiry in epoch ms, or -1 when
 * full.
 */
const ACQUIRE_SLOT = `${NOW}local slots, capacity, ttl, token = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
${SLOT_TAKE}return expiry
`;

/**
 * RPM_CHECK then, when it admits, SLOT_TAKE, atomically: KEYS[1] bucket zset, KEYS[2] channel
 * zset; ARGV limit, windowMs, member, capacity, ttlMs, token (capacity -1: no slot asked).
 * Returns {allowed, remaining, resetMs, expiry}: expiry -1 when the channel was full, -2 when
 * no slot was taken (refused, or none asked).
 */
const HIT_RPM_ACQUIRE = `${NOW}${RPM_CHECK}
local slots, capacity, ttl, token = KEYS[2], tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
if allowed == 0 or capacity < 0 then
  return {allowed, remaining, reset, -2}
end
${SLOT_TAKE}return {allowed, remaining, reset, expiry}
`;

/** KEYS[1] channel zset. ARGV ttlMs, token. Returns the new expiry, or -1 if no longer held. */
const RENEW_SLOT = `${NOW}
local key = KEYS[1]
local ttl = tonumber(ARGV[1])
local expires = redis.call('ZSCORE', key, ARGV[2])
if not expires or tonumber(expires) <= now then
  redis.call('ZREM', key, ARGV[2])
  return -1
end
redis.call('ZADD', key, 'XX', now + ttl, ARGV[2])
if redis.call('PTTL', key) < ttl then
  redis.call('PEXPIRE', key, ttl)
end
return now + ttl
`;

/** KEYS[1] channel zset. Returns the number of unexpired slots. */
const SLOTS_IN_USE = `${NOW}
return redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
`;

/**
 * KEYS[1] strike zset, KEYS[2] blacklist hash of the source, KEYS[3] blacklist index zset,
 * KEYS[4] blacklist version (INCR on every change, so mirrors know to reload).
 * ARGV max, windowMs, banMs, member, reason, source.
 * Returns nil below max, else {reason, untilMs, addedBy} of the restriction in force.
 */
const RECORD_STRIKE = `${NOW}
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
redis.call('ZADD', KEYS[1], now, ARGV[4])
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('PEXPIRE', KEYS[1], window)
  return false
end
redis.call('DEL', KEYS[1])
local untilMs = now + tonumber(ARGV[3])
local current = redis.call('HMGET', KEYS[2], 'reason', 'untilMs', 'addedBy')
if current[2] and tonumber(current[2]) >= untilMs then
  return {current[1], tonumber(current[2]), current[3]}
end
redis.call('HSET', KEYS[2], 'reason', ARGV[5], 'untilMs', untilMs, 'addedBy', 'rule')
redis.call('PEXPIREAT', KEYS[2], untilMs)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
redis.call('ZADD', KEYS[3], untilMs, ARGV[6])
redis.call('INCR', KEYS[4])
return {ARGV[5], untilMs, 'rule'}
`;

/**
 * KEYS[1] blacklist hash of the source, KEYS[2] index zset, KEYS[3] version.
 * ARGV banMs, reason, source. Returns untilMs.
 */
const ADD_TO_BLACKLIST = `${NOW}
local untilMs = now + tonumber(ARGV[1])
redis.call('HSET', KEYS[1], 'reason', ARGV[2], 'untilMs', untilMs, 'addedBy', 'admin')
redis.call('PEXPIREAT', KEYS[1], untilMs)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZADD', KEYS[2], untilMs, ARGV[3])
redis.call('INCR', KEYS[3])
return untilMs
`;

/**
 * KEYS[1] blacklist hash, KEYS[2] index zset, KEYS[3] version. ARGV source. Returns 1 if a
 * restriction lifted.
 */
const REMOVE_FROM_BLACKLIST = `
local existed = redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('INCR', KEYS[3])
return existed
`;

/** KEYS[1] index zset. Returns the sources whose restriction has not lifted, soonest first. */
const LIVE_BLACKLIST = `${NOW}
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return redis.call('ZRANGE', KEYS[1], 0, -1)
`;

type Reply = Promise<unknown>;

/** The scripts as client commands; ioredis sends EVALSHA and falls back to EVAL on NOSCRIPT. */
export type LimiterCommands = {
  syHitRpm(key: string, limit: number, windowMs: number, member: string): Reply;
  syAcquireSlot(key: string, capacity: number, ttlMs: number, token: string): Reply;
  syHitRpmAcquire(
    bucketKey: string,
    slotKey: string,
    limit: number,
    windowMs: number,
    member: string,
    capacity: number,
    ttlMs: number,
    token: string,
  ): Reply;
  syRenewSlot(key: string, ttlMs: number, token: string): Reply;
  sySlotsInUse(key: string): Reply;
  syRecordStrike(
    strikeKey: string,
    entryKey: string,
    indexKey: string,
    versionKey: string,
    max: number,
    windowMs: number,
    banMs: number,
    member: string,
    reason: string,
    source: string,
  ): Reply;
  syAddToBlacklist(
    entryKey: string,
    indexKey: string,
    versionKey: string,
    banMs: number,
    reason: string,
    source: string,
  ): Reply;
  syRemoveFromBlacklist(
    entryKey: string,
    indexKey: string,
    versionKey: string,
    source: string,
  ): Reply;
  syLiveBlacklist(indexKey: string): Reply;
};

const SCRIPTS: ReadonlyArray<readonly [keyof LimiterCommands, number, string]> = [
  ['syHitRpm', 1, HIT_RPM],
  ['syAcquireSlot', 1, ACQUIRE_SLOT],
  ['syHitRpmAcquire', 2, HIT_RPM_ACQUIRE],
  ['syRenewSlot', 1, RENEW_SLOT],
  ['sySlotsInUse', 1, SLOTS_IN_USE],
  ['syRecordStrike', 4, RECORD_STRIKE],
  ['syAddToBlacklist', 3, ADD_TO_BLACKLIST],
  ['syRemoveFromBlacklist', 3, REMOVE_FROM_BLACKLIST],
  ['syLiveBlacklist', 1, LIVE_BLACKLIST],
];

/** Defines the scripts on the client once (idempotent) and returns it typed with them. */
export function withLimiterCommands(client: Redis): Redis & LimiterCommands {
  const commands = client as Redis & Partial<LimiterCommands>;
  for (const [name, numberOfKeys, lua] of SCRIPTS) {
    if (commands[name] === undefined) client.defineCommand(name, { numberOfKeys, lua });
  }
  return client as Redis & LimiterCommands;
}
