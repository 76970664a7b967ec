/**
 * Responses handed to kafkajs's request queue without kafkajs's joining of socket chunks.
 *
 * Why: kafkajs's connection (`network/connection.js`, `processData`) keeps the bytes left after a
 * response (an empty slice, most of the time) as its first chunk, and joins its chunks with
 * `Buffer.concat` whenever it holds more than one — that is, for every chunk that arrives. A Fetch
 * response of a megabyte or more, in 64 KiB socket chunks, was copied whole once and its first
 * chunk twice; every fetched byte went through a fresh buffer of the response's size. Here a
 * response wholly inside a chunk is a slice of that chunk (no copy), and one spread over chunks is
 * copied once into a buffer of its size, chunk by chunk as they arrive. With the sockets of
 * `response-socket.ts`, which read each large response straight into its own buffer, a Fetch
 * response is not copied at all.
 */

/** The parts of kafkajs's connection (kafkajs 2.2.4, `network/connection.js`) replaced or used here. */
export interface ResponseReadingConnection {
  /** The socket of the current connection; a new one after a reconnect. */
  readonly socket: { destroy(error: Error): void };
  /** Set while kafkajs authenticates (SASL): its own reading then takes over. */
  readonly authHandlers: unknown;
  /** kafkajs's own buffering: chunks not yet a whole response. */
  chunks: Buffer[];
  bytesBuffered: number;
  bytesNeeded: number;
  readonly requestQueue: {
    fulfillRequest(response: { size: number; correlationId: number; payload: Buffer }): void;
  };
  processData(rawData: Buffer): void;
}

const SIZE_BYTES = 4;
const CORRELATION_ID_BYTES = 4;

const readsWhole = new WeakSet<object>();

/**
 * Replaces `connection.processData` (the handler of every chunk its socket reads) by one that hands
 * each response to kafkajs's request queue as a slice of the chunk it arrived in, or as one buffer
 * of its size when it spanned several chunks. `Buffer.concat` is left for two small, rare cases: a
 * size field split between two chunks (under 4 bytes kept), and what kafkajs's own handler still
 * held when authentication ended — each joined once with the next chunk. While kafkajs
 * authenticates the connection, kafkajs's own handler runs (given whatever part of a response is
 * held here). Calling it again on the same connection does nothing.
 *
 * @example
 * ```ts
 * const connection = await broker.connectionPool.getConnection(1); // kafkajs's Fetch connection
 * readResponsesWhole(connection);
 * ```
 */
export function readResponsesWhole(connection: ResponseReadingConnection): void {
  if (readsWhole.has(connection)) return;
  readsWhole.add(connection);
  const kafkajsProcessData = connection.processData;
  /** A response spread over chunks, filled up to `filled`; it includes its size field. */
  let pending: Buffer | undefined;
  let filled = 0;
  /** The socket of the last call: bytes of a response begun do not outlive a reconnect. */
  let socket: unknown = connection.socket;

  const deliver = (from: Buffer, start: number, end: number) => {
    connection.requestQueue.fulfillRequest({
      size: end - start - SIZE_BYTES,
      correlationId: from.readInt32BE(start + SIZE_BYTES),
      payload: from.subarray(start + SIZE_BYTES + CORRELATION_ID_BYTES, end),
    });
  };

  connection.processData = (rawData: Buffer): void => {
    if (connection.socket !== socket) {
      socket = connection.socket;
      pending = undefined;
      connection.chunks = [];
      connection.bytesBuffered = 0;
      connection.bytesNeeded = SIZE_BYTES;
    }
    if (connection.authHandlers !== null && connection.authHandlers !== undefined) {
      if (pending !== undefined) {
        // kafkajs's own handler continues the response begun here.
        connection.chunks = [pending.subarray(0, filled)];
        connection.bytesBuffered = filled;
        connection.bytesNeeded = pending.length;
        pending = undefined;
      }
      kafkajsProcessData.call(connection, rawData);
      return;
    }
    let data = rawData;
    if (connection.bytesBuffered > 0) {
      // A few bytes kept by kafkajs's handler or by the end of the last call: small, joined once.
      data = Buffer.concat([...connection.chunks, rawData]);
    }
    connection.chunks = [];
    connection.bytesBuffered = 0;
    connection.bytesNeeded = SIZE_BYTES;
    let at = 0;
    if (pending !== undefined) {
      const copied = data.copy(pending, filled, 0, Math.min(data.length, pending.length - filled));
      filled += copied;
      at = copied;
      if (filled < pending.length) return;
      const response = pending;
      pending = undefined;
      deliver(response, 0, response.length);
    }
    while (data.length - at >= SIZE_BYTES) {
      const size = data.readInt32BE(at);
      if (size < CORRELATION_ID_BYTES) {
        // Not a Kafka response: the connection's error handler fails what is in flight.
        connection.socket.destroy(
          new Error(`a response of ${size} bytes from the broker: not Kafka's protocol`),
        );
        return;
      }
      const end = at + SIZE_BYTES + size;
      if (end <= data.length) {
        deliver(data, at, end);
        at = end;
        continue;
      }
      pending = Buffer.allocUnsafe(end - at);
      filled = data.copy(pending, 0, at);
      return;
    }
    if (at < data.length) {
      // Not even a size field: kept the way kafkajs keeps bytes, in case it authenticates next.
      const rest = data.subarray(at);
      connection.chunks = [rest];
      connection.bytesBuffered = rest.length;
    }
  };
}
