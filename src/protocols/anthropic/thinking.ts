// Makes config-supplied extended thinking acceptable to Anthropic without breaking the client's
// output cap: the upstream rejects (400) budget_tokens >= max_tokens, budgets under 1024, and
// temperature / top_k / top_p < 0.95 alongside thinking.

import { countAt, isObject } from '../json-read.ts';
import type { JsonObject } from '../types.ts';

/** Anthropic's smallest accepted thinking budget. */
const MIN_BUDGET = 1024;

/**
 * Applied to an upstream body whose `thinking` came from config. The client's max_tokens is a
 * cost promise (spec 2.1), so it is kept and the budget shrinks to fit under it; when not even
 * 1024 thinking tokens fit, thinking is dropped rather than the request failing.
 */
export function fitThinking(body: JsonObject): void {
  const thinking = body.thinking;
  if (!isObject(thinking) || thinking.type !== 'enabled') return;
  const maxTokens = countAt(body, 'max_tokens');
  const budget = countAt(thinking, 'budget_tokens');
  if (maxTokens !== null && budget !== null && budget >= maxTokens) {
    if (maxTokens - 1 < MIN_BUDGET) {
      delete body.thinking;
      return;
    }
    body.thinking = { ...thinking, budget_tokens: maxTokens - 1 };
  }
  delete body.temperature;
  delete body.top_k;
  const topP = body.top_p;
  if (typeof topP === 'number' && topP < 0.95) delete body.top_p;
}
