// Writes a streamed response's body chunks to the client's socket as whole HTTP/1.1 chunks, one
// socket write each, instead of through ServerResponse#write (decision 0041).
//
// ServerResponse#write frames a chunk as four socket writes (size, CRLF, data, CRLF) through
// OutgoingMessage's layers. One framed buffer per chunk cut the gateway's main-thread CPU per
// back-to-back stream (100 chunks) by 4-22% in six `npm run bench:ab` runs (last: 3,965 → 3,086
// µs, the bare proxy 3,066), and per paced stream by 5-10%; TTFT within the tool's noise.

import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

const CR = 13;
const LF = 10;

/** The parts of node's OutgoingMessage and its socket this reads; not in @types/node. */
interface ResponseState {
  /** True when node frames this response's body as chunked (HTTP/1.1, no content-length). */
  chunkedEncoding?: boolean;
  /**
   * The header block has been handed to the socket. `headersSent` is true from writeHead on,
   * while node still holds the block to send with the first body write.
   */
  _headerSent?: boolean;
  /** What node holds for the response until it has a socket of its own. */
  outputData?: readonly unknown[];
}
interface SocketState {
  /** The response the socket is serving now (pipelined responses wait their turn). */
  _httpMessage?: unknown;
}

/**
 * The socket a body chunk may be written to directly: the response's header block has been
 * handed to the socket (`_headerSent`, not `headersSent`), its body is framed as chunked, it is
 * the response its socket is serving, and node holds nothing of it back, so a write there lands
 * after everything written before. Null otherwise (HTTP/1.0, a pipelined response waiting its
 * turn, a stand-in for the socket in a test, or a Node whose internals moved): the caller writes
 * through ServerResponse, which is always right.
 */
export function chunkSocket(res: ServerResponse): Socket | null {
  const socket = res.socket as (Socket & SocketState) | null | undefined;
  if (socket === null || socket === undefined || !socket.writable) return null;
  const state = res as ServerResponse & ResponseState;
  if (
    socket._httpMessage !== res ||
    state.chunkedEncoding !== true ||
    state._headerSent !== true ||
    state.outputData === undefined ||
    state.outputData.length !== 0
  )
    return null;
  return socket;
}

/**
 * Writes `data` to `socket` as one HTTP/1.1 chunk (`<size hex>\r\n<data>\r\n`, as node frames
 * it), in one write. Returns socket.write's answer: false when the caller should wait for the
 * socket's 'drain'. An empty chunk is not written (it would read as the body's end).
 */
export function writeChunk(socket: Socket, data: Uint8Array): boolean {
  const n = data.length;
  if (n === 0) return true;
  const size = n.toString(16);
  const frame = Buffer.allocUnsafe(size.length + n + 4);
  let at = frame.write(size, 0, 'latin1');
  frame[at++] = CR;
  frame[at++] = LF;
  frame.set(data, at);
  at += n;
  frame[at++] = CR;
  frame[at] = LF;
  // Corked to the end of this tick, as ServerResponse#write does: the chunks of one upstream read
  // (several when the gateway is behind) leave in one writev, not one syscall each.
  if (!socket.writableCorked) {
    socket.cork();
    process.nextTick(uncork, socket);
  }
  return socket.write(frame);
}

function uncork(socket: Socket): void {
  socket.uncork();
}

/**
 * Hands what the response has written so far to the kernel now. ServerResponse#write corks the
 * socket and uncorks it on the next tick, so a stream's first chunk (with the header block) left
 * only after the rest of the relay's synchronous bookkeeping and every microtask queued behind
 * it: 38-56 µs after the write on the gateway against 8-15 on the bare proxy, which writes from a
 * 'data' callback (`bench:ab --stages`, "its bytes to the kernel", decision 0071). Node's own
 * uncork on the next tick then finds the socket uncorked and does nothing.
 */
export function sendWritten(res: ServerResponse): void {
  const socket = res.socket;
  if (socket !== null && socket !== undefined && socket.writableCorked > 0) socket.uncork();
}
