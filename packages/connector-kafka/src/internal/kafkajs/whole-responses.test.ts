import { createRequire } from "node:module";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ResponseReader } from "./response-socket.js";
import { type ResponseReadingConnection, readResponsesWhole } from "./whole-responses.js";

// Real kafkajs connections (`network/connection.js`, never connected): the same chunks go to one
// with kafkajs's own `processData` and to one read by `readResponsesWhole`, and both must hand the
// request queue the same responses. The sockets' side is in response-socket.test.ts; the real
// broker's in the connector's Kafka tests (every Fetch goes through here).

const requireKafkajs = createRequire(import.meta.url);
const Connection = requireKafkajs("kafkajs/src/network/connection") as new (
  options: Record<string, unknown>,
) => ResponseReadingConnection & { authHandlers: unknown; authExpectResponse: boolean; socket: unknown };
const { createLogger, LEVELS } = requireKafkajs("kafkajs/src/loggers") as {
  createLogger(options: { level: number; logCreator: () => () => void }): unknown;
  LEVELS: { NOTHING: number };
};

interface Delivered {
  size: number;
  correlationId: number;
  payload: Buffer;
}

/** A kafkajs connection whose request queue records what it is handed; its socket records destroys. */
function kafkajsConnection() {
  const connection = new Connection({
    host: "localhost",
    port: 9092,
    logger: createLogger({ level: LEVELS.NOTHING, logCreator: () => () => {} }),
    requestTimeout: 30_000,
    connectionTimeout: 1_000,
  });
  const delivered: Delivered[] = [];
  connection.requestQueue.fulfillRequest = (response) => delivered.push(response);
  const destroyed: Error[] = [];
  connection.socket = { destroy: (error: Error) => destroyed.push(error) };
  return { connection, delivered, destroyed };
}

/** A response as the broker writes it: INT32 size, INT32 correlation id, payload. */
function response(correlationId: number, payload: Buffer): Buffer {
  const frame = Buffer.alloc(8 + payload.length);
  frame.writeInt32BE(4 + payload.length, 0);
  frame.writeInt32BE(correlationId, 4);
  payload.copy(frame, 8);
  return frame;
}

/** Payloads mostly small, some past a 64 KiB socket chunk (a Fetch response's size). */
const payloads = fc.array(
  fc.oneof(
    { weight: 4, arbitrary: fc.uint8Array({ maxLength: 300 }) },
    { weight: 1, arbitrary: fc.integer({ min: 64 * 1024 - 16, max: 200 * 1024 }) },
  ),
  { minLength: 1, maxLength: 12 },
);

function payloadsOf(drawn: Array<Uint8Array | number>, seed: number): Buffer[] {
  return drawn.map((d, i) => {
    if (typeof d !== "number") return Buffer.from(d);
    const big = Buffer.allocUnsafe(d);
    for (let at = 0; at < d; at++) big[at] = (at * 31 + i + seed) & 0xff;
    return big;
  });
}

/** `stream` in chunks ending at `cuts` (positions, any order, duplicates allowed). */
function chunked(stream: Buffer, cuts: number[]): Buffer[] {
  const ends = [...new Set(cuts.map((c) => c % (stream.length + 1)))].sort((a, b) => a - b);
  const chunks: Buffer[] = [];
  let start = 0;
  for (const end of [...ends, stream.length]) {
    if (end <= start) continue;
    // Each chunk its own memory, as a socket's reads.
    chunks.push(Buffer.from(stream.subarray(start, end)));
    start = end;
  }
  return chunks;
}

const plain = (d: Delivered) => ({
  size: d.size,
  correlationId: d.correlationId,
  payload: Buffer.from(d.payload).toString("hex"),
});

describe("readResponsesWhole", () => {
  it("hands the request queue what kafkajs's own processData does, however the responses are chunked", () => {
    fc.assert(
      fc.property(
        payloads,
        fc.array(fc.nat(), { maxLength: 40 }),
        fc.nat({ max: 1_000_000 }),
        (drawn, cuts, seed) => {
          const frames = payloadsOf(drawn, seed).map((p, i) => response(i + seed, p));
          const chunks = chunked(Buffer.concat(frames), cuts);
          const kafkajs = kafkajsConnection();
          const whole = kafkajsConnection();
          readResponsesWhole(whole.connection);
          for (const chunk of chunks) {
            kafkajs.connection.processData(chunk);
            whole.connection.processData(chunk);
          }
          expect(whole.delivered.map(plain)).toEqual(kafkajs.delivered.map(plain));
          expect(whole.delivered).toHaveLength(frames.length);
        },
      ),
      { numRuns: 150 },
    );
  });

  it("gives a response that arrived in one chunk as a slice of that chunk, one spread over chunks copied once", () => {
    const { connection, delivered } = kafkajsConnection();
    readResponsesWhole(connection);
    const first = Buffer.concat([response(1, Buffer.from("one")), response(2, Buffer.from("two"))]);
    connection.processData(first);
    expect(delivered.map((d) => d.payload.buffer)).toEqual([first.buffer, first.buffer]);

    const spread = response(3, Buffer.alloc(100_000, 7));
    connection.processData(spread.subarray(0, 70_000));
    connection.processData(spread.subarray(70_000));
    const third = delivered[2] as Delivered;
    expect(third.payload.equals(Buffer.alloc(100_000, 7))).toBe(true);
    // One buffer of the response's size, not a concatenation of everything buffered so far.
    expect(third.payload.buffer.byteLength).toBe(spread.length);
    expect(third.payload.buffer).not.toBe(spread.buffer);
  });

  it("lets kafkajs's own handler finish a response begun here once it authenticates", () => {
    const { connection, delivered } = kafkajsConnection();
    readResponsesWhole(connection);
    const authentication = response(9, Buffer.from("sasl-handshake-answer"));
    connection.processData(authentication.subarray(0, 10));
    const answers: Buffer[] = [];
    connection.authHandlers = { onSuccess: (raw: Buffer) => answers.push(raw), onError: () => {} };
    connection.authExpectResponse = true;
    connection.processData(authentication.subarray(10));
    expect(answers.map((a) => a.toString("hex"))).toEqual([authentication.toString("hex")]);
    expect(delivered).toEqual([]);

    connection.authHandlers = null;
    connection.authExpectResponse = false;
    connection.processData(response(10, Buffer.from("after")));
    expect(delivered.map(plain)).toEqual([
      plain({ size: 9, correlationId: 10, payload: Buffer.from("after") }),
    ]);
  });

  it("drops a response begun on a socket the connection has since replaced", () => {
    const { connection, delivered } = kafkajsConnection();
    readResponsesWhole(connection);
    connection.processData(response(1, Buffer.alloc(200_000, 1)).subarray(0, 65_536));
    connection.socket = { destroy: () => {} }; // kafkajs reconnected
    connection.processData(response(2, Buffer.from("fresh")));
    expect(delivered.map(plain)).toEqual([
      plain({ size: 9, correlationId: 2, payload: Buffer.from("fresh") }),
    ]);
  });

  it("closes the connection on a size no Kafka response has, delivering nothing", () => {
    const { connection, delivered, destroyed } = kafkajsConnection();
    readResponsesWhole(connection);
    const garbage = Buffer.alloc(12);
    garbage.writeInt32BE(-5, 0);
    connection.processData(garbage);
    expect(delivered).toEqual([]);
    expect(destroyed.map((e) => e.message)).toEqual([
      "a response of -5 bytes from the broker: not Kafka's protocol",
    ]);
  });

  it("replaces processData once, however often it is called", () => {
    const { connection, delivered } = kafkajsConnection();
    readResponsesWhole(connection);
    const replaced = connection.processData;
    readResponsesWhole(connection);
    expect(connection.processData).toBe(replaced);
    connection.processData(response(4, Buffer.from("x")));
    expect(delivered).toHaveLength(1);
  });

  it("reads a large response without a copy when the socket reads it into its own buffer", () => {
    const { connection, delivered } = kafkajsConnection();
    readResponsesWhole(connection);
    const emitted: Buffer[] = [];
    const reader = new ResponseReader((responses) => {
      emitted.push(responses);
      connection.processData(responses);
    });
    const large = response(5, Buffer.alloc(300_000, 3));
    let at = 0;
    const readInto: ArrayBufferLike[] = [];
    while (at < large.length) {
      const target = reader.nextBuffer();
      const bytes = Math.min(target.length, large.length - at, 50_000);
      large.copy(target, 0, at, at + bytes);
      readInto.push(target.buffer);
      at += bytes;
      reader.received(bytes);
    }
    const payload = (delivered[0] as Delivered).payload;
    expect(payload.equals(Buffer.alloc(300_000, 3))).toBe(true);
    // The buffer the socket read the response's body into is the one the payload lies in.
    expect(readInto.at(-1)).toBe(payload.buffer);
    expect(emitted).toHaveLength(1);
  });
});
