import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { CheckpointError, OnceflowError } from "../errors/onceflow-error.js";
import { createConsoleLogger, logSafeFields } from "./logger.js";

/** A console logger writing into memory; `fields()` parses the JSON after the message of each line. */
function captureConsole(): { lines: string[]; logger: ReturnType<typeof createConsoleLogger> } {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString().split("\n").filter(Boolean));
      done();
    },
  });
  return { lines, logger: createConsoleLogger({ level: "debug", stream }) };
}

function fieldsOf(line: string): Record<string, unknown> {
  const start = line.indexOf(" {");
  expect(start, `no fields in: ${line}`).toBeGreaterThan(0);
  return JSON.parse(line.slice(start + 1)) as Record<string, unknown>;
}

/** Stands in for a pg Client: a class instance holding the connection settings and the backend key. */
class Client {
  readonly connectionParameters = { user: "app", password: "client-password", host: "db" };
  readonly processID = 4242;
  readonly secretKey = 987654321;
  readonly padding = "x".repeat(2_000);
}

describe("createConsoleLogger", () => {
  it("writes an error's name, message, code, stack and cause", () => {
    const { lines, logger } = captureConsole();
    const root = Object.assign(new Error("connection reset by peer"), { code: "ECONNRESET" });
    const error = new CheckpointError("CHECKPOINT_FAILED", "storing checkpoint 3 failed", {
      checkpointId: 3,
      cause: root,
    });
    logger.error({ err: error, checkpointId: 3 }, "checkpoint failed");

    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/ERROR checkpoint failed \{/);
    const fields = fieldsOf(lines[0]!);
    expect(fields.checkpointId).toBe(3);
    const err = fields.err as Record<string, unknown>;
    expect(err.name).toBe("CheckpointError");
    expect(err.message).toBe("storing checkpoint 3 failed");
    expect(err.code).toBe("CHECKPOINT_FAILED");
    expect(err.stack).toMatch(/^CheckpointError: storing checkpoint 3 failed\n\s+at /);
    const cause = err.cause as Record<string, unknown>;
    expect(cause).toMatchObject({ name: "Error", message: "connection reset by peer", code: "ECONNRESET" });
    expect(cause.stack).toMatch(/connection reset by peer/);
  });

  it("writes an Error held by any field, in arrays and nested objects too", () => {
    const { lines, logger } = captureConsole();
    logger.warn(
      {
        failure: new TypeError("bad input"),
        attempts: [new RangeError("too far")],
        last: { reason: new OnceflowError("JOB_FAILED", "gave up") },
      },
      "retrying",
    );
    const fields = fieldsOf(lines[0]!);
    expect(fields.failure).toMatchObject({ name: "TypeError", message: "bad input" });
    expect((fields.attempts as unknown[])[0]).toMatchObject({ name: "RangeError", message: "too far" });
    expect((fields.last as { reason: unknown }).reason).toMatchObject({
      name: "OnceflowError",
      code: "JOB_FAILED",
      message: "gave up",
    });
  });

  it("writes what was thrown into err when it is not an Error", () => {
    const { lines, logger } = captureConsole();
    logger.error({ err: "plain text" }, "a");
    logger.error({ error: { message: "thrown object", code: 57, client: new Client() } }, "b");
    expect(fieldsOf(lines[0]!).err).toBe("plain text");
    expect(fieldsOf(lines[1]!).error).toEqual({ message: "thrown object", code: 57 });
  });

  it("follows causes to a bounded depth and survives a cause cycle", () => {
    const { lines, logger } = captureConsole();
    let error = new Error("level 0");
    for (let level = 1; level <= 20; level++) error = new Error(`level ${level}`, { cause: error });
    const looping = new Error("loops");
    (looping as { cause?: unknown }).cause = looping;
    logger.error({ err: error, other: looping }, "deep");
    const fields = fieldsOf(lines[0]!);
    let cause = fields.err as { cause?: unknown; message?: string };
    let depth = 0;
    while (typeof cause.cause === "object" && cause.cause !== null) {
      cause = cause.cause as typeof cause;
      depth++;
    }
    expect(depth).toBeGreaterThan(2);
    expect(depth).toBeLessThanOrEqual(6);
    expect(cause.cause).toBe("[further causes left out]");
    expect((fields.other as { cause?: unknown }).cause).toBe("[Circular]");
  });

  it("never writes passwords, keys or client objects", () => {
    const { lines, logger } = captureConsole();
    const error = Object.assign(new Error("Connection terminated unexpectedly"), { client: new Client() });
    logger.warn(
      {
        err: error,
        client: new Client(),
        connection: {
          password: "hunter2",
          secretKey: 12345,
          apiKey: "k-123",
          access_token: "t-123",
          authorization: "Bearer abc",
          ssl: { key: "-----BEGIN PRIVATE KEY-----", cert: "c" },
          sasl: { mechanism: "plain", username: "u", password: "sasl-password" },
        },
        url: "postgres://app:url-password@db:5432/orders",
        urlWithAt: "postgresql://app:p@ss-word@db/orders",
        dsn: "host=db user=app password=dsn-password dbname=orders",
        key: "order-17",
      },
      "an idle PostgreSQL connection failed (postgresql://app:message-password@db/orders)",
    );
    const line = lines[0]!;
    for (const secret of [
      "hunter2",
      "client-password",
      "987654321",
      "12345",
      "k-123",
      "t-123",
      "Bearer",
      "PRIVATE KEY",
      "sasl-password",
      "url-password",
      "dsn-password",
      "message-password",
      "ss-word",
      "xxxxxxxx",
    ]) {
      expect(line, `leaked ${secret}`).not.toContain(secret);
    }
    const fields = fieldsOf(line);
    expect(fields.client).toBe("[Client]");
    expect(fields.err).not.toHaveProperty("client");
    expect(fields.connection).toMatchObject({ password: "[redacted]", secretKey: "[redacted]" });
    expect(fields.url).toBe("postgres://app:[redacted]@db:5432/orders");
    expect(fields.urlWithAt).toBe("postgresql://app:[redacted]@db/orders");
    expect(fields.dsn).toBe("host=db user=app password=[redacted] dbname=orders");
    expect(fields.key).toBe("order-17");
    expect(line).toContain("postgresql://app:[redacted]@db/orders");
    expect(line.length).toBeLessThan(1_500);
  });

  it("summarises circular and huge objects instead of dumping them", () => {
    const { lines, logger } = captureConsole();
    const circular: Record<string, unknown> = { name: "a" };
    circular.self = circular;
    const huge = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`k${i}`, "v".repeat(1_000)]));
    logger.info(
      {
        circular,
        huge,
        many: Array.from({ length: 10_000 }, (_, i) => i),
        text: "t".repeat(100_000),
        bytes: Buffer.alloc(1_000_000),
        big: 2n ** 70n,
      },
      "sizes",
    );
    const line = lines[0]!;
    expect(line.length).toBeLessThan(20_000);
    const fields = fieldsOf(line);
    expect(fields.circular).toEqual({ name: "a", self: "[Circular]" });
    expect(fields.huge).toMatch(/^\[summarised: 40 keys, \d+ characters of JSON\]$/);
    expect((fields.many as unknown[]).at(-1)).toBe("… 9950 more");
    expect(fields.text).toMatch(/… \(95904 more characters\)$/);
    expect(fields.bytes).toBe("[Buffer 1000000 bytes]");
    expect(fields.big).toBe("1180591620717411303424");
  });

  it("makes child bindings safe too, and keeps a line whose field cannot be read", () => {
    const { lines, logger } = captureConsole();
    logger.child({ password: "bound-password", jobId: "orders" }).info("started");
    const throwing = {
      get value(): never {
        throw new Error("getter failed");
      },
    };
    logger.info({ throwing }, "still written");
    expect(lines[0]).not.toContain("bound-password");
    expect(fieldsOf(lines[0]!)).toEqual({ password: "[redacted]", jobId: "orders" });
    expect(lines[1]).toMatch(/INFO still written \{"logFieldsUnwritable":"Error: getter failed"\}/);
  });
});

describe("logSafeFields", () => {
  it("is usable on its own, for another logger", () => {
    expect(logSafeFields({ err: new Error("boom"), token: "abc", n: 1 })).toMatchObject({
      err: { name: "Error", message: "boom" },
      token: "[redacted]",
      n: 1,
    });
  });
});
