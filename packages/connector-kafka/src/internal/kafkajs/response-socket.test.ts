import { once } from "node:events";
import { createServer, type Server, type Socket } from "node:net";
import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import { ResponseReader, responseSocketFactory } from "./response-socket.js";

// The reader against streams read in pieces of every size; the socket against a local TCP server
// that writes responses in odd pieces. The broker's side is in the connector's Kafka tests, whose
// clients are made with this factory.

/** Responses as a broker writes them: INT32 size, then that many bytes. */
function responses(sizes: number[]): Buffer[] {
  return sizes.map((size, i) => {
    const frame = Buffer.allocUnsafe(4 + size);
    frame.writeInt32BE(size, 0);
    for (let at = 4; at < frame.length; at++) frame[at] = (at + i) & 0xff;
    return frame;
  });
}

/** Splits a concatenation of responses back into them, failing on a partial one. */
function split(emitted: Buffer): Buffer[] {
  const frames: Buffer[] = [];
  let at = 0;
  while (at < emitted.length) {
    const end = at + 4 + emitted.readInt32BE(at);
    expect(end).toBeLessThanOrEqual(emitted.length);
    frames.push(emitted.subarray(at, end));
    at = end;
  }
  return frames;
}

const sizes = fc.array(
  fc.oneof(
    { weight: 4, arbitrary: fc.integer({ min: 4, max: 2_000 }) },
    { weight: 1, arbitrary: fc.integer({ min: 60_000, max: 300_000 }) },
  ),
  { minLength: 1, maxLength: 12 },
);

describe("ResponseReader", () => {
  it("emits whole responses only, in order, however the socket's reads fall", () => {
    fc.assert(
      fc.property(sizes, fc.array(fc.integer({ min: 1, max: 100_000 }), { minLength: 1 }), (drawn, reads) => {
        const frames = responses(drawn);
        const stream = Buffer.concat(frames);
        const emitted: Buffer[] = [];
        const reader = new ResponseReader((r) => emitted.push(r));
        let at = 0;
        let read = 0;
        while (at < stream.length) {
          const target = reader.nextBuffer();
          expect(target.length).toBeGreaterThan(0);
          const bytes = Math.min(target.length, stream.length - at, reads[read++ % reads.length] as number);
          stream.copy(target, 0, at, at + bytes);
          at += bytes;
          reader.received(bytes);
        }
        const got = emitted.flatMap(split);
        expect(got.map((f) => f.toString("hex"))).toEqual(frames.map((f) => f.toString("hex")));
      }),
      { numRuns: 100 },
    );
  });

  it("reads a response too large for its scratch buffer into a buffer of its own and hands that on", () => {
    const emitted: Buffer[] = [];
    const reader = new ResponseReader((r) => emitted.push(r));
    const [large] = responses([100_000]) as [Buffer];
    let at = 0;
    const targets: Buffer[] = [];
    while (at < large.length) {
      const target = reader.nextBuffer();
      targets.push(target);
      const bytes = Math.min(target.length, large.length - at);
      large.copy(target, 0, at, at + bytes);
      at += bytes;
      reader.received(bytes);
    }
    expect(emitted).toHaveLength(1);
    expect((emitted[0] as Buffer).equals(large)).toBe(true);
    // The first read went to the scratch buffer; the rest straight into the emitted one.
    expect(targets).toHaveLength(2);
    expect((targets[1] as Buffer).buffer).toBe((emitted[0] as Buffer).buffer);
    expect(emitted[0]?.length).toBe(emitted[0]?.buffer.byteLength);
  });
});

describe("responseSocketFactory", () => {
  let server: Server | undefined;
  afterEach(async () => {
    server?.close();
    server = undefined;
  });

  it("connects a socket whose data events carry the server's responses whole, in order", async () => {
    const frames = responses([10, 70_000, 3, 0, 250_000, 65_532, 65_533, 17, 1_000_000, 5]);
    const stream = Buffer.concat(frames);
    server = createServer((connection: Socket) => {
      // Odd pieces, each written after the last was flushed: the client's reads fall anywhere.
      const pieces = [1, 2, 7, 70_001, 3, 65_536, 5, 1_000, 200_000, 123_457];
      let at = 0;
      let piece = 0;
      const writeNext = () => {
        if (at >= stream.length) return connection.end();
        const size = pieces[piece++ % pieces.length] as number;
        const chunk = stream.subarray(at, at + size);
        at += chunk.length;
        connection.write(chunk, () => setImmediate(writeNext));
      };
      writeNext();
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const { port } = server.address() as { port: number };
    let connected = false;
    const socket = responseSocketFactory()({
      host: "127.0.0.1",
      port,
      ssl: undefined,
      onConnect: () => {
        connected = true;
      },
    });
    const emitted: Buffer[] = [];
    socket.on("data", (data: Buffer) => emitted.push(data));
    await once(socket, "end");
    socket.destroy();
    expect(connected).toBe(true);
    expect(emitted.flatMap(split).map((f) => f.length)).toEqual(frames.map((f) => f.length));
    expect(Buffer.concat(emitted).equals(stream)).toBe(true);
  });
});
