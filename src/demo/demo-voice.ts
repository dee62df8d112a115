// What the built-in demo says: it repeats the user's last message after a prefix that names the
// offline demo, so nobody mistakes a quick-start answer for a real model's.

import { userText, type Voice } from './plan.ts';

/** Characters of the user's message the answer repeats; longer messages end with "…". */
export const DEMO_ECHO_LIMIT = 200;
export const DEMO_PREFIX = 'Switchyard offline demo: you said';

/**
 * The answer split into stream pieces at each run of whitespace, one piece per output token:
 * `Switchyard offline demo: you said "hi".` is 6 pieces, so 6 output tokens.
 */
export function demoAnswer(body: Record<string, unknown>): readonly string[] {
  const said = userText(body).replace(/\s+/g, ' ').trim();
  const echo =
    said.length === 0
      ? 'nothing'
      : `"${said.length > DEMO_ECHO_LIMIT ? `${said.slice(0, DEMO_ECHO_LIMIT)}…` : said}"`;
  return splitPieces(`${DEMO_PREFIX} ${echo}.`);
}

/** Each piece is a word with the whitespace before it, as tokenizers split text. */
export function splitPieces(text: string): string[] {
  return text.match(/\s*\S+/g) ?? [text];
}

export const DEMO_VOICE: Voice = {
  tag: 'demo',
  toolArguments: '{"query":"demo"}',
  models: ['demo-chat', 'demo-image'],
  answer: demoAnswer,
};
