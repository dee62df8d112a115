// Which endpoint kinds each upstream protocol can serve, natively or through a translation.
// The compiler uses it to reject impossible routes; the relay uses `translate` from the table.
import type { EndpointKind, Protocol } from '../../generated/config.ts';

export type { EndpointKind, Protocol };

export const ENDPOINT_KINDS: readonly EndpointKind[] = [
  'chat',
  'responses',
  'messages',
  'completions',
  'embeddings',
  'rerank',
  'images_generations',
  'images_edits',
  'images_variations',
  'audio_speech',
  'audio_transcriptions',
  'audio_translations',
  'realtime',
  'moderations',
  'search',
  'video',
  'drawing',
  'music',
];

export const PROTOCOLS: readonly Protocol[] = ['openai', 'anthropic'];

/** Served as the client sent it (model name replaced). */
export const NATIVE: Readonly<Record<Protocol, ReadonlySet<EndpointKind>>> = {
  // JSON in, JSON out. Multipart (image edits/variations, transcriptions, translations), binary
  // speech, the realtime websocket and the drawing/music task protocols have no adapter yet, so
  // config that opens them fails validation instead of failing at request time.
  openai: new Set<EndpointKind>([
    'chat',
    'responses',
    'completions',
    'embeddings',
    'rerank',
    'images_generations',
    'moderations',
    'search',
    'video',
  ]),
  anthropic: new Set<EndpointKind>(['messages']),
};

/** Served by translating between protocols (chat ⇄ messages, streaming and tools included). */
export const TRANSLATED: Readonly<Record<Protocol, ReadonlySet<EndpointKind>>> = {
  openai: new Set<EndpointKind>(['messages']),
  anthropic: new Set<EndpointKind>(['chat']),
};

export function canServe(protocol: Protocol, endpoint: EndpointKind): boolean {
  return NATIVE[protocol].has(endpoint) || TRANSLATED[protocol].has(endpoint);
}
