import { createServer, type Server } from "node:net";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { findFreePort } from "../../runtime/free-port.js";
import { startPostgres } from "./start-postgres.js";

// Another process takes the port between "found free" and "bound": the first port handed out is one
// this test holds open.
const held = vi.hoisted(() => ({ port: 0, handedOut: false }));
vi.mock("../../runtime/free-port.js", async (importOriginal) => {
  const original = await importOriginal<typeof import("../../runtime/free-port.js")>();
  return {
    ...original,
    findFreePort: async (host?: string) => {
      if (!held.handedOut && held.port !== 0) {
        held.handedOut = true;
        return held.port;
      }
      return original.findFreePort(host);
    },
  };
});

describe("a local PostgreSQL whose port is taken before it binds", () => {
  let blocker: Server;
  beforeAll(async () => {
    held.port = await findFreePort();
    blocker = createServer((socket) => socket.destroy()); // holds the port, serves nobody
    await new Promise<void>((resolve) => blocker.listen(held.port, "127.0.0.1", resolve));
  });
  afterAll(() => new Promise<void>((resolve) => blocker.close(() => resolve())));

  it("starts on another port instead of failing", async () => {
    const postgres = await startPostgres({ provider: "local", writer: () => {} });
    try {
      expect(held.handedOut).toBe(true);
      expect(postgres.port).not.toBe(held.port);
      expect(postgres.maxPreparedTransactions).toBe(64);
    } finally {
      await postgres.stop();
    }
  });
});
