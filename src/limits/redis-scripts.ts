// The Lua scripts behind redis-limiter.ts. Each runs atomically on the server and reads the
// server's clock (TIME), so gateway processes with skewed clocks still share one exact window.
import type { Redis } from 'ioredis';

// Server time in epoch ms. Scripts that call TIME and then write are replicated by effects, the
// only mode since Redis 7 and the default since 5.
const NOW = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`;

// Members and tokens are `<tag><n>` with n a decimal counter the caller reserved; a block of
// `count` of them from `c0` goes in with one ZADD per 500 (unpack's stack bound is ~8,000).
const ADD_MEMBERS = `local function addMembers(key, score, tag, c0, count)
  local i = 0
  while i < count do
    local m = math.min(count - i, 500)
    local args = {}
    for j = 0, m - 1 do
      args[2 * j + 1] = score
      args[2 * j + 2] = string.format('%s%d', tag, c0 + i + j)
    end
    redis.call('ZADD', key, unpack(args))
    i = i + m
  end
end
local function extendTo(key, ttl)
  if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ttl) end
end
-- How many to grant of want when free are left: 1 (this request alone, exact) unless a block
-- of at least 2 fits in an eighth of what is free, so blocks shrink as a limit nears and vanish
-- within 16 of it.
local function grantOf(want, free)
  if want <= 1 then return 1 end
  local g = math.min(want, math.floor(free / 8))
  if g < 2 then return 1 end
  return g
end
`;

/**
 * The RPM hit and the capacity slot of one request, each of which may also reserve a block for
 * the calling process to hand out locally (redis-limiter.ts, decision 0031).
 *
 * KEYS[1] the RPM bucket zset (score = time the hit counts from, member unique per hit), KEYS[2]
 * the channel's slot zset (score = expiry, member = lease token).
 * ARGV limit (-1: no RPM hit), windowMs, rpmWant, tag, rpmC0, leaseMs, capacity (-1: no slot),
 * ttlMs, slotWant, slotC0, ahead (1: a block asked for ahead of need, with no request of its own).
 *
 * RPM: when fewer than `limit` hits count in the window, this hit is counted at now and, if a
 * block is granted, grant - 1 more at now + leaseMs: the caller uses them only within leaseMs of
 * sending, so each counts for at least a full window after its real admission. Rejected hits
 * are not counted. Ahead, no hit is counted at now: the whole grant is dated at now + leaseMs, and
 * a grant below 2 is none (the block is a spare; the request that needs a hit asks for its own).
 * Slot: expired leases are purged (a process that died holding them), then, under capacity, the
 * lease (and a block's others) is held until now + ttlMs, plus leaseMs for a block.
 *
 * Returns {allowed, remaining, resetMs, rpmGrant, expiry, slotGrant, held}: held is the channel's
 * slots held after the call (-1: not read); expiry -1 when the channel
 * was full, -2 when no slot was taken (the hit was refused, or none asked).
 */
const HIT_AND_TAKE = `${NOW}${ADD_MEMBERS}
local tag, lease = ARGV[4], tonumber(ARGV[6])
local ahead = ARGV[11] == '1'
local limit = tonumber(ARGV[1])
local allowed, remaining, reset, rpmGrant = 1, 0, 0, 0
if limit >= 0 then
  local key, window = KEYS[1], tonumber(ARGV[2])
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local count = redis.call('ZCARD', key)
  allowed, reset = 0, window
  if count < limit then
    local c0 = tonumber(ARGV[5])
    rpmGrant = grantOf(tonumber(ARGV[3]), limit - count)
    if ahead then
      if rpmGrant < 2 then rpmGrant = 0 end
      addMembers(key, now + lease, tag, c0, rpmGrant)
    else
      redis.call('ZADD', key, now, string.format('%s%d', tag, c0))
      if rpmGrant > 1 then addMembers(key, now + lease, tag, c0 + 1, rpmGrant - 1) end
    end
    extendTo(key, window + lease)
    allowed, remaining = 1, limit - count - rpmGrant
  end
  if allowed == 1 or count > 0 then
    -- Empty when a block asked ahead was granted nothing on an empty window.
    local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    if oldest[2] then reset = tonumber(oldest[2]) + window - now end
  end
end
local capacity = tonumber(ARGV[7])
if allowed == 0 or capacity < 0 then
  return {allowed, remaining, reset, rpmGrant, -2, 0, -1}
end
local slots, ttl = KEYS[2], tonumber(ARGV[8])
redis.call('ZREMRANGEBYSCORE', slots, '-inf', now)
local held = redis.call('ZCARD', slots)
if held >= capacity then
  return {allowed, remaining, reset, rpmGrant, -1, 0, held}
end
local slotGrant = grantOf(tonumber(ARGV[9]), capacity - held)
-- Slot blocks fill at most half the channel: a slot one process holds unused is refused to
-- every other, so past half each slot is its own call (and callers give their blocks back).
if slotGrant > 1 then
  local room = math.floor(capacity / 2) - held
  if room < 2 then slotGrant = 1 elseif slotGrant > room then slotGrant = room end
end
if ahead and slotGrant < 2 then
  return {allowed, remaining, reset, rpmGrant, -2, 0, held}
end
local expiry = now + ttl
if slotGrant > 1 then expiry = expiry + lease end
addMembers(slots, expiry, tag, tonumber(ARGV[10]), slotGrant)
extendTo(slots, expiry - now)
return {allowed, remaining, reset, rpmGrant, expiry, slotGrant, held + slotGrant}
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
 * KEYS[4] blacklist version (INCR on every change, so mirrors know to reload; PUBLISHed on the
 * channel of the same name, by pcall: a user whose ACL lacks the channel still changes the list,
 * and mirrors see it at their poll).
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
redis.pcall('PUBLISH', KEYS[4], redis.call('INCR', KEYS[4]))
return {ARGV[5], untilMs, 'rule'}
`;

/**
 * KEYS[1] blacklist hash of the source, KEYS[2] index zset, KEYS[3] version (INCR and PUBLISH).
 * ARGV banMs, reason, source. Returns untilMs.
 */
const ADD_TO_BLACKLIST = `${NOW}
local untilMs = now + tonumber(ARGV[1])
redis.call('HSET', KEYS[1], 'reason', ARGV[2], 'untilMs', untilMs, 'addedBy', 'admin')
redis.call('PEXPIREAT', KEYS[1], untilMs)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZADD', KEYS[2], untilMs, ARGV[3])
redis.pcall('PUBLISH', KEYS[3], redis.call('INCR', KEYS[3]))
return untilMs
`;

/**
 * KEYS[1] blacklist hash, KEYS[2] index zset, KEYS[3] version (INCR and PUBLISH). ARGV source. Returns 1 if a
 * restriction lifted.
 */
const REMOVE_FROM_BLACKLIST = `
local existed = redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.pcall('PUBLISH', KEYS[3], redis.call('INCR', KEYS[3]))
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
  syHitAndTake(
    bucketKey: string,
    slotKey: string,
    limit: number,
    windowMs: number,
    rpmWant: number,
    tag: string,
    rpmC0: number,
    leaseMs: number,
    capacity: number,
    ttlMs: number,
    slotWant: number,
    slotC0: number,
    ahead: 0 | 1,
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
  ['syHitAndTake', 2, HIT_AND_TAKE],
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
