// The Anthropic side of the demo upstream: messages answers (text, thinking, tool_use) and the
// published stream event sequence, with usage in message_start and message_delta.

import {
  jsonReply,
  nextId,
  REASONING_TOKENS,
  sse,
  streamReply,
  TOOL_CALL_TOKENS,
  type Reply,
  type ReplyPlan,
} from './plan.ts';

export function isAnthropicThinking(body: Record<string, unknown>): boolean {
  const t = body.thinking;
  return typeof t === 'object' && t !== null && (t as Record<string, unknown>).type === 'enabled';
}

export function anthropicToolName(tool: unknown): string | null {
  if (typeof tool !== 'object' || tool === null) return null;
  const name = (tool as Record<string, unknown>).name;
  return typeof name === 'string' ? name : null;
}

const THINKING = 'Let me think about this.';
const SIGNATURE = 'bW9jay1zaWduYXR1cmU=';
/** The short text an Anthropic model writes before calling a tool. */
const TOOL_PREAMBLE = 'Calling the tool.';

function outputTokens(plan: ReplyPlan): number {
  return (
    plan.pieces.length +
    (plan.tool !== null ? TOOL_CALL_TOKENS : 0) +
    (plan.reasoning ? REASONING_TOKENS : 0)
  );
}

function usage(plan: ReplyPlan, output: number): Record<string, unknown> {
  return {
    input_tokens: plan.inputTokens,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: plan.cacheHitTokens,
    output_tokens: output,
    service_tier: 'standard',
  };
}

export function messagesReply(plan: ReplyPlan): Reply {
  const id = nextId('msg_', plan.tag);
  const toolId = plan.tool !== null ? nextId('toolu_', plan.tag) : '';
  const text = plan.tool !== null ? TOOL_PREAMBLE : plan.pieces.join('');
  const stopReason = plan.tool !== null ? 'tool_use' : 'end_turn';
  const message = (
    content: unknown[],
    stop: string | null,
    u: unknown,
  ): Record<string, unknown> => {
    const m: Record<string, unknown> = {
      id,
      type: 'message',
      role: 'assistant',
      model: plan.model,
      content,
      stop_reason: stop,
      stop_sequence: null,
    };
    if (!plan.omitUsage) m.usage = u;
    return m;
  };
  if (!plan.stream) {
    const content: unknown[] = [];
    if (plan.reasoning)
      content.push({ type: 'thinking', thinking: THINKING, signature: SIGNATURE });
    content.push({ type: 'text', text });
    if (plan.tool !== null) {
      content.push({
        type: 'tool_use',
        id: toolId,
        name: plan.tool,
        input: JSON.parse(plan.toolArguments) as unknown,
      });
    }
    return jsonReply(message(content, stopReason, usage(plan, outputTokens(plan))), true);
  }
  const parts = [
    sse('message_start', { type: 'message_start', message: message([], null, usage(plan, 1)) }),
  ];
  let index = 0;
  const delta = (d: unknown): string =>
    sse('content_block_delta', { type: 'content_block_delta', index, delta: d });
  const stop = (): string =>
    sse('content_block_stop', { type: 'content_block_stop', index: index++ });
  if (plan.reasoning) {
    parts.push(
      sse('content_block_start', {
        type: 'content_block_start',
        index,
        content_block: { type: 'thinking', thinking: '', signature: '' },
      }),
      delta({ type: 'thinking_delta', thinking: THINKING }),
      delta({ type: 'signature_delta', signature: SIGNATURE }),
      stop(),
    );
  }
  parts.push(
    sse('content_block_start', {
      type: 'content_block_start',
      index,
      content_block: { type: 'text', text: '' },
    }),
    sse('ping', { type: 'ping' }),
  );
  if (plan.tool !== null) parts.push(delta({ type: 'text_delta', text: TOOL_PREAMBLE }));
  else for (const piece of plan.pieces) parts.push(delta({ type: 'text_delta', text: piece }));
  parts.push(stop());
  if (plan.tool !== null) {
    const half = plan.toolArguments.length >> 1;
    parts.push(
      sse('content_block_start', {
        type: 'content_block_start',
        index,
        content_block: { type: 'tool_use', id: toolId, name: plan.tool, input: {} },
      }),
      delta({ type: 'input_json_delta', partial_json: '' }),
      delta({ type: 'input_json_delta', partial_json: plan.toolArguments.slice(0, half) }),
      delta({ type: 'input_json_delta', partial_json: plan.toolArguments.slice(half) }),
      stop(),
    );
  }
  const finalDelta: Record<string, unknown> = {
    type: 'message_delta',
    delta: { stop_reason: stopReason, stop_sequence: null },
  };
  if (!plan.omitUsage) finalDelta.usage = { output_tokens: outputTokens(plan) };
  parts.push(sse('message_delta', finalDelta), sse('message_stop', { type: 'message_stop' }));
  return streamReply(parts);
}

/** Anthropic's error object for a status, as its API writes it. */
export function anthropicError(status: number, message: string): unknown {
  const type =
    status === 401
      ? 'authentication_error'
      : status === 403
        ? 'permission_error'
        : status === 404
          ? 'not_found_error'
          : status === 429
            ? 'rate_limit_error'
            : status === 529
              ? 'overloaded_error'
              : status >= 500
                ? 'api_error'
                : 'invalid_request_error';
  return { type: 'error', error: { type, message } };
}
