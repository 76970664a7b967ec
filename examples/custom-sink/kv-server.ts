import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";

// A tiny HTTP key-value store that stands in for any system with idempotency keys (a payments API,
// a document store…). A write is staged under a transaction id (PUT, idempotent), published by
// POST …/commit (idempotent: a second commit of the same id changes nothing), or dropped by DELETE.
//
//   PUT    /transactions/:id          body: [{ "key": "...", "value": ... }]   stage (replaces)
//   POST   /transactions/:id/commit                                          publish once
//   DELETE /transactions/:id                                                 drop if staged
//   GET    /entries                                                          the published map

/** One key-value pair. */
export interface Entry {
  readonly key: string;
  readonly value: unknown;
}

/** A running key-value server. */
export interface KeyValueServer {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  /** Published entries, by key. */
  readonly entries: Map<string, unknown>;
  close(): Promise<void>;
}

async function body(request: IncomingMessage): Promise<string> {
  let text = "";
  for await (const chunk of request) text += String(chunk);
  return text;
}

/** Starts the server on 127.0.0.1 (a free port unless given). */
export async function startKeyValueServer(port = 0): Promise<KeyValueServer> {
  const entries = new Map<string, unknown>();
  const staged = new Map<string, Entry[]>();
  const committed = new Set<string>();
  const server: Server = createServer((request, response) => {
    void (async () => {
      const url = new URL(request.url ?? "/", "http://localhost");
      const match = /^\/transactions\/([\w-]+)(\/commit)?$/.exec(url.pathname);
      const id = match?.[1];
      if (request.method === "GET" && url.pathname === "/entries") {
        response.writeHead(200, { "content-type": "application/json" });
        response.end(JSON.stringify([...entries].map(([key, value]) => ({ key, value }))));
      } else if (id !== undefined && request.method === "PUT" && match?.[2] === undefined) {
        if (!committed.has(id)) staged.set(id, JSON.parse(await body(request)) as Entry[]);
        response.writeHead(204).end();
      } else if (id !== undefined && request.method === "POST" && match?.[2] !== undefined) {
        const writes = staged.get(id);
        if (writes !== undefined) {
          for (const entry of writes) entries.set(entry.key, entry.value);
          staged.delete(id);
          committed.add(id);
        }
        // Committed before (or now): 204. Never staged and never committed: 404, the data is gone.
        response.writeHead(committed.has(id) ? 204 : 404).end();
      } else if (id !== undefined && request.method === "DELETE") {
        staged.delete(id);
        response.writeHead(204).end();
      } else {
        response.writeHead(404).end();
      }
    })().catch((error: unknown) => {
      response.writeHead(500).end(String(error));
    });
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  const { port: bound } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${bound}`,
    entries,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}
