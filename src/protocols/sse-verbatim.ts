// Reads an upstream chunk of SSE events at the byte level, to tell whether a relay may write the
// chunk itself instead of decoding, re-framing and re-encoding each event (decision 0030).

const LF = 10;
const CR = 13;
const SPACE = 32;
const TAB = 9;
const COLON = 58;
const DATA = Buffer.from('data: ');
const EVENT = Buffer.from('event: ');
const DONE = Buffer.from('[DONE]');
const USAGE = Buffer.from('"usage"');
const ERROR = Buffer.from('"error"');
const NULL = Buffer.from('null');

/**
 * The number of events in `chunk` when it is nothing but whole events of the one shape the chat
 * relay writes back unchanged (`data: <one line>\n\n`, no `\r`), none of them `[DONE]`, none with
 * an `"error"` and every `"usage"` in it followed by `: null`; otherwise -1, and the caller takes
 * the event-by-event path. It is stricter than that path's own test, never looser: it counts only
 * chunks that path would also have written byte for byte as they came.
 */
export function plainChatEvents(chunk: Buffer): number {
  const n = chunk.length;
  if (n < 8 || chunk[n - 1] !== LF || chunk[n - 2] !== LF) return -1;
  if (chunk.indexOf(CR) !== -1 || chunk.indexOf(ERROR) !== -1) return -1;
  let at = chunk.indexOf(USAGE);
  while (at !== -1) {
    if (!isNullValue(chunk, at + USAGE.length)) return -1;
    at = chunk.indexOf(USAGE, at + USAGE.length);
  }
  return wholeEvents(chunk, null);
}

/**
 * The same for relays that read events by name (Anthropic messages, OpenAI Responses): the number
 * of events when `chunk` is nothing but whole `event: <name>\ndata: <one line>\n\n` events, no
 * `\r`, and no name in `mustRead`; otherwise -1.
 */
export function plainNamedEvents(chunk: Buffer, mustRead: ReadonlySet<string>): number {
  const n = chunk.length;
  if (n < 8 || chunk[n - 1] !== LF || chunk[n - 2] !== LF || chunk.indexOf(CR) !== -1) return -1;
  return wholeEvents(chunk, mustRead);
}

/**
 * Counts the events of a chunk that ends on a blank line, each `data: <line>\n\n` (names null)
 * or `event: <name>\ndata: <line>\n\n` with a name not in `names`; -1 at anything else: another
 * field, a second data line, a missing space, an empty name, `[DONE]`.
 */
function wholeEvents(chunk: Buffer, names: ReadonlySet<string> | null): number {
  const n = chunk.length;
  let events = 0;
  let pos = 0;
  while (pos < n) {
    if (names !== null) {
      if (!startsWith(chunk, EVENT, pos)) return -1;
      const nameStart = pos + EVENT.length;
      const nameEnd = chunk.indexOf(LF, nameStart);
      if (nameEnd <= nameStart || names.has(chunk.toString('latin1', nameStart, nameEnd)))
        return -1;
      pos = nameEnd + 1;
    }
    if (!startsWith(chunk, DATA, pos)) return -1;
    const start = pos + DATA.length;
    const lf = chunk.indexOf(LF, start);
    // A second line (another data: line, an id: field) or a missing blank line: -1.
    if (lf === -1 || chunk[lf + 1] !== LF) return -1;
    if (lf - start === DONE.length && chunk.compare(DONE, 0, DONE.length, start, lf) === 0) {
      return -1;
    }
    events++;
    pos = lf + 2;
  }
  return events;
}

function startsWith(chunk: Buffer, prefix: Buffer, at: number): boolean {
  const end = at + prefix.length;
  return end <= chunk.length && chunk.compare(prefix, 0, prefix.length, at, end) === 0;
}

/** `chunk` at `from` reads `\s*:\s*null` (spaces and tabs only). */
function isNullValue(chunk: Buffer, from: number): boolean {
  let i = skipBlanks(chunk, from);
  if (chunk[i] !== COLON) return false;
  i = skipBlanks(chunk, i + 1);
  return (
    i + NULL.length <= chunk.length && chunk.compare(NULL, 0, NULL.length, i, i + NULL.length) === 0
  );
}

function skipBlanks(chunk: Buffer, from: number): number {
  let i = from;
  while (chunk[i] === SPACE || chunk[i] === TAB) i++;
  return i;
}
