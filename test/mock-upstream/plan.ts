// The mock's voice on top of the demo core (src/demo): "Hello from the mock upstream." in as many
// pieces as scripted, and the token arithmetic tests use to predict usage.

import {
  basePlan as coreBasePlan,
  estimateInputTokens,
  REASONING_TOKENS,
  TOOL_CALL_TOKENS,
  type Reply,
  type ReplyPlan,
  type Voice,
} from '../../src/demo/plan.ts';
import type { MockBehaviour } from './behaviour.ts';

export { lastUserText, sse, toolToCall } from '../../src/demo/plan.ts';

/** Words of the default answer; chunk i carries WORDS[i % 6]: "Hello from the mock upstream." */
export const WORDS = ['Hello', ' from', ' the', ' mock', ' upstream', '.'];
export const DEFAULT_CHUNKS = 6;
/** Reasoning tokens reported (and included in output) when the request enables reasoning. */
export const MOCK_REASONING_TOKENS = REASONING_TOKENS;
/** Output tokens of a tool call answer (on top of the text chunks of an Anthropic answer). */
export const MOCK_TOOL_CALL_TOKENS = TOOL_CALL_TOKENS;
/** Arguments of every mock tool call, sent in two pieces when streaming. */
export const MOCK_TOOL_ARGUMENTS = '{"query":"mock"}';

export type MockPlan = ReplyPlan;
/** One answer as the server will write it: a JSON body, or the SSE events of a stream. */
export type MockReply = Reply;

/** The words of `chunks` chunks, one per output token. */
export function answerPieces(chunks: number): string[] {
  const pieces: string[] = [];
  for (let i = 0; i < chunks; i++) pieces.push(WORDS[i % WORDS.length] as string);
  return pieces;
}

/** The answer text of `chunks` chunks. */
export function answerText(chunks: number): string {
  return answerPieces(chunks).join('');
}

export const MOCK_VOICE: Voice = {
  tag: 'mock',
  toolArguments: MOCK_TOOL_ARGUMENTS,
  models: ['mock-chat', 'mock-embed', 'mock-image'],
  answer: (_body, chunks) => answerPieces(Math.max(1, chunks ?? DEFAULT_CHUNKS)),
};

/**
 * Default uncached input tokens: one token per 4 characters of the JSON of what the model reads
 * (messages, system, input), at least 1. Tests call this to predict usage.
 */
export const mockInputTokens = estimateInputTokens;

export function basePlan(
  body: Record<string, unknown>,
  behaviour: MockBehaviour | null,
  reasoning: boolean,
  tool: string | null,
): MockPlan {
  return coreBasePlan(body, MOCK_VOICE, behaviour, reasoning, tool);
}
