/**
 * A kafkajs socket factory whose sockets read each large response straight into a buffer of its own.
 *
 * Why: a plain socket hands its reader a new 64 KiB chunk per read, which kafkajs then joins into
 * the response (`whole-responses.ts`). A Fetch response of a megabyte or more is ~20 chunks
 * allocated, filled and thrown away, then a copy. This socket reads with Node's `onread` option:
 * small responses into one reused scratch buffer (copied out, whole, in one buffer per read), and
 * once a response's size field says it will not fit there, its remaining bytes straight into a
 * buffer of its size, handed on as it is when full. Every `data` event carries whole responses
 * only. TLS sockets are kafkajs's own, from its default factory (Node's TLS socket has no `onread`).
 */
import { connect as connectTcp, type Socket } from "node:net";
import type { ConnectionOptions } from "node:tls";
import { kafkajsModule } from "./kafkajs-loader.js";

const SIZE_BYTES = 4;
/** The size of a plain socket's reads. */
const SCRATCH_BYTES = 64 * 1024;
/** kafkajs's own factory (`network/socketFactory.js`), for TLS. */
const kafkajsSocketFactory = kafkajsModule<() => SocketFactory>("kafkajs/src/network/socketFactory");
/** As kafkajs's default socket factory. */
const KEEP_ALIVE_DELAY_MS = 60_000;

/** kafkajs's `ISocketFactory`. */
export type SocketFactory = (options: {
  host: string;
  port: number;
  ssl: ConnectionOptions | boolean | undefined;
  onConnect: () => void;
}) => Socket;

/**
 * A socket factory for kafkajs (`new Kafka({ socketFactory })`): plain TCP sockets emit whole
 * responses, large ones read straight into their own buffers; TLS sockets from kafkajs's default
 * factory. The clients the connector makes from `brokers` have it; give it to a kafkajs client of
 * your own (passed as `kafka`) over plain TCP, SASL included, and its Fetch responses are not
 * copied either. Each call makes a factory for one client.
 *
 * @example
 * ```ts
 * const kafka = new Kafka({ brokers: ["localhost:9092"], socketFactory: responseSocketFactory() });
 * ```
 */
export function responseSocketFactory(): SocketFactory {
  let tlsSockets: SocketFactory | undefined;
  return (options) => {
    if (options.ssl) {
      const sockets = tlsSockets ?? kafkajsSocketFactory()();
      tlsSockets = sockets;
      return sockets(options);
    }
    const socket = connectResponseSocket(options.host, options.port, options.onConnect);
    socket.setKeepAlive(true, KEEP_ALIVE_DELAY_MS);
    return socket;
  };
}

function connectResponseSocket(host: string, port: number, onConnect: () => void): Socket {
  const reader = new ResponseReader((responses) => socket.emit("data", responses));
  const socket = connectTcp(
    {
      host,
      port,
      onread: {
        buffer: () => reader.nextBuffer(),
        callback: (bytes) => {
          reader.received(bytes);
          return true; // keep reading
        },
      },
    },
    onConnect,
  );
  return socket;
}

/**
 * Splits a stream of Kafka responses (each an INT32 size and that many bytes) into whole ones, and
 * says where the next read goes. Exported for its tests.
 *
 * @example
 * ```ts
 * const reader = new ResponseReader((responses) => socket.emit("data", responses));
 * const target = reader.nextBuffer(); // read into it, then:
 * reader.received(bytesRead);
 * ```
 */
export class ResponseReader {
  private readonly scratch = Buffer.allocUnsafe(SCRATCH_BYTES);
  /** Bytes at the start of `scratch` not yet a whole response. */
  private scratchFilled = 0;
  /** A response too large for `scratch`, its size field included, filled up to `filled`. */
  private large: Buffer | undefined;
  private filled = 0;

  constructor(private readonly emit: (responses: Buffer) => void) {}

  /** Where the next read goes: the rest of a large response, or the free part of the scratch buffer. */
  nextBuffer(): Buffer {
    return this.large !== undefined
      ? this.large.subarray(this.filled)
      : this.scratch.subarray(this.scratchFilled);
  }

  /** `bytes` were read into the buffer {@link nextBuffer} returned last. */
  received(bytes: number): void {
    if (this.large !== undefined) {
      this.filled += bytes;
      if (this.filled < this.large.length) return;
      const response = this.large;
      this.large = undefined;
      this.emit(response);
      return;
    }
    const held = this.scratchFilled + bytes;
    let end = 0;
    while (held - end >= SIZE_BYTES) {
      const size = this.scratch.readInt32BE(end);
      // Negative is not Kafka's protocol: handed on, for the connection's reader to refuse.
      const next = end + SIZE_BYTES + Math.max(size, 0);
      if (next > held) break;
      end = next;
    }
    // Copied: the scratch buffer is read into again.
    if (end > 0) this.emit(Buffer.from(this.scratch.subarray(0, end)));
    const rest = held - end;
    if (rest >= SIZE_BYTES) {
      const size = SIZE_BYTES + this.scratch.readInt32BE(end);
      if (size > SCRATCH_BYTES) {
        // Big enough to be worth its own buffer (a Fetch response, mostly), read into directly.
        this.large = Buffer.allocUnsafe(size);
        this.filled = this.scratch.copy(this.large, 0, end, held);
        this.scratchFilled = 0;
        return;
      }
    }
    if (end > 0 && rest > 0) this.scratch.copyWithin(0, end, held);
    this.scratchFilled = rest;
  }
}
