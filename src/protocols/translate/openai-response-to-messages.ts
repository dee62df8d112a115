// A chat.completion answering a messages request: rewritten as an Anthropic message object
// (thinking from reasoning_content, text, tool_use blocks, stop_reason, Anthropic-style usage).

import { isObject, parseJson, stringAt } from '../json-read.ts';
import type {
  AnthropicContentBlock,
  AnthropicMessage,
  AnthropicUsage,
  JsonObject,
} from '../types.ts';
import { usageFromOpenAiChat, type Usage } from '../usage.ts';
import { finishToAnthropicReason } from './stop-reasons.ts';

/**
 * `model` names the model in the answer (null: the upstream's own name). Returns null when
 * `completion` is not a chat.completion with a choice.
 */
export function openAiResponseToMessages(
  completion: unknown,
  model: string | null,
): AnthropicMessage | null {
  if (!isObject(completion) || !Array.isArray(completion.choices)) return null;
  const choice: unknown = completion.choices[0];
  if (!isObject(choice) || !isObject(choice.message)) return null;
  const message = choice.message;
  const content: AnthropicContentBlock[] = [];
  const reasoning = stringAt(message, 'reasoning_content');
  if (reasoning !== null && reasoning.length > 0) {
    // No signature exists for another vendor's reasoning; an empty one marks it as such.
    content.push({ type: 'thinking', thinking: reasoning, signature: '' });
  }
  const text = stringAt(message, 'content');
  if (text !== null && text.length > 0) content.push({ type: 'text', text });
  let madeToolCalls = false;
  if (Array.isArray(message.tool_calls)) {
    for (const call of message.tool_calls) {
      if (!isObject(call) || !isObject(call.function)) continue;
      madeToolCalls = true;
      content.push({
        type: 'tool_use',
        id: stringAt(call, 'id') ?? '',
        name: stringAt(call.function, 'name') ?? '',
        input: toolInput(stringAt(call.function, 'arguments')),
      });
    }
  }
  return {
    id: stringAt(completion, 'id') ?? '',
    type: 'message',
    role: 'assistant',
    model: model ?? stringAt(completion, 'model') ?? '',
    content,
    stop_reason: finishToAnthropicReason(choice.finish_reason, madeToolCalls),
    stop_sequence: null,
    usage: anthropicUsageFrom(usageFromOpenAiChat(completion.usage)),
  };
}

/** Anthropic's input_tokens excludes cache reads, which get their own field. */
export function anthropicUsageFrom(usage: Usage | null): AnthropicUsage {
  return {
    input_tokens: usage?.inputTokens ?? 0,
    output_tokens: usage?.outputTokens ?? 0,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: usage?.cacheHitTokens ?? 0,
  };
}

/** Tool arguments are a JSON string in OpenAI and an object in Anthropic. */
export function toolInput(args: string | null): JsonObject {
  if (args === null || args.length === 0) return {};
  const parsed = parseJson(args);
  return isObject(parsed) ? parsed : {};
}
