// An Anthropic message answering a chat completions request: rewritten as a chat.completion
// object (text, tool calls, thinking as reasoning_content, finish reason, OpenAI-style usage).

import type { AnthropicUsageAccumulator } from '../anthropic/usage-accumulator.ts';
import { countAt, isObject, stringAt } from '../json-read.ts';
import type { ChatCompletion, ChatToolCall, ChatUsage, JsonObject } from '../types.ts';
import { anthropicToFinishReason } from './stop-reasons.ts';

/**
 * `model` names the model in the answer (null: the upstream's own name). Returns null when
 * `message` is not an Anthropic message object.
 */
export function anthropicResponseToChat(
  message: unknown,
  model: string | null,
): ChatCompletion | null {
  if (!isObject(message) || !Array.isArray(message.content)) return null;
  let text = '';
  let reasoning = '';
  const toolCalls: ChatToolCall[] = [];
  for (const block of message.content) {
    if (!isObject(block)) continue;
    if (block.type === 'text') text += stringAt(block, 'text') ?? '';
    else if (block.type === 'thinking') reasoning += stringAt(block, 'thinking') ?? '';
    else if (block.type === 'tool_use') {
      toolCalls.push({
        id: stringAt(block, 'id') ?? '',
        type: 'function',
        function: {
          name: stringAt(block, 'name') ?? '',
          arguments: JSON.stringify(block.input ?? {}),
        },
      });
    }
  }
  const usage = isObject(message.usage) ? chatUsageFromAnthropic(message.usage) : null;
  return {
    id: stringAt(message, 'id') ?? '',
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: model ?? stringAt(message, 'model') ?? '',
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          // OpenAI sends content null when the turn is only tool calls.
          content: text.length > 0 || toolCalls.length === 0 ? text : null,
          ...(reasoning.length > 0 ? { reasoning_content: reasoning } : {}),
          ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
          refusal: null,
        },
        finish_reason: anthropicToFinishReason(message.stop_reason),
        logprobs: null,
      },
    ],
    usage,
  };
}

/**
 * OpenAI's prompt_tokens counts every prompt token, cached or not, so it is
 * input + cache_read + cache_creation, with the cache reads in prompt_tokens_details.
 */
export function chatUsageFromAnthropic(usage: JsonObject): ChatUsage {
  return makeChatUsage(
    countAt(usage, 'input_tokens') ?? 0,
    countAt(usage, 'cache_read_input_tokens') ?? 0,
    countAt(usage, 'cache_creation_input_tokens') ?? 0,
    countAt(usage, 'output_tokens') ?? 0,
  );
}

export function chatUsageFromAccumulator(acc: AnthropicUsageAccumulator): ChatUsage {
  return makeChatUsage(
    acc.inputTokens,
    acc.cacheReadTokens,
    acc.cacheCreationTokens,
    acc.outputTokens,
  );
}

function makeChatUsage(input: number, read: number, write: number, output: number): ChatUsage {
  const prompt = input + read + write;
  return {
    prompt_tokens: prompt,
    completion_tokens: output,
    total_tokens: prompt + output,
    prompt_tokens_details: { cached_tokens: read },
  };
}
