// Why a generation stopped, in each protocol's words, mapped both ways.

import type { AnthropicStopReason, ChatFinishReason } from '../types.ts';

/** Anthropic stop_reason → chat finish_reason (pause_turn: the turn ended early, as "stop"). */
export function anthropicToFinishReason(reason: unknown): ChatFinishReason {
  switch (reason) {
    case 'max_tokens':
      return 'length';
    case 'tool_use':
      return 'tool_calls';
    case 'refusal':
      return 'content_filter';
    default:
      return 'stop';
  }
}

/** chat finish_reason → Anthropic stop_reason; a turn that made tool calls is always tool_use. */
export function finishToAnthropicReason(
  reason: unknown,
  madeToolCalls: boolean,
): AnthropicStopReason {
  if (madeToolCalls) return 'tool_use';
  switch (reason) {
    case 'length':
      return 'max_tokens';
    case 'tool_calls':
    case 'function_call':
      return 'tool_use';
    case 'content_filter':
      return 'refusal';
    default:
      return 'end_turn';
  }
}
