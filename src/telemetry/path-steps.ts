// Named points on a model request's path from its arrival to its upstream call, published on a
// diagnostics channel for `npm run bench:ab -- --stages` (bench/stage-probe.ts), which times each
// step of a path that runs cold: ~600-900 µs on the hosts of sessions 57-58 against ~30 warm,
// spread over a dozen steps (docs/performance.md). Nothing is published while nobody subscribes:
// one property read a point, as undici's own diagnostics channels.
import { channel } from 'node:diagnostics_channel';

export const PATH_STEP_CHANNEL = 'switchyard:path-step';

/**
 * The steps in path order, each named for what has just been done: the model front took the
 * request (its id, its turn), the observer started, the client's address and the blacklist, the
 * key, the body read and parsed, the body validated for the model, the RPM hit (and the first
 * channel's slot), the reservation, the upstream call planned. The probe's last step is the
 * upstream request itself (undici's `undici:request:create`).
 */
export const PATH_STEPS = [
  'front',
  'observer',
  'blacklist',
  'key',
  'body',
  'validated',
  'rpm',
  'reserved',
  'planned',
] as const;

export type PathStep = (typeof PATH_STEPS)[number];

const steps = channel(PATH_STEP_CHANNEL);

/** Marks the end of `step` for the request whose async context this runs in. */
export function pathStep(step: PathStep): void {
  if (steps.hasSubscribers) steps.publish(step);
}
