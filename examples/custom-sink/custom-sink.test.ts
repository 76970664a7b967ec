import type { TwoPhaseCommitSink } from "@onceflow/core";
import { describeTwoPhaseCommitSink } from "@onceflow/testkit/vitest";
import { describe, expect, it } from "vitest";
import { HttpKeyValueSink } from "./http-key-value-sink.js";
import type { Entry } from "./kv-server.js";
import { type KeyValueServer, startKeyValueServer } from "./kv-server.js";
import { runCustomSinkExample } from "./main.js";

describe("examples/custom-sink", () => {
  it("runs the pipeline: every view published once", async () => {
    const published = await runCustomSinkExample(3000);
    expect(published.size).toBe(3000);
    expect(published.get("view:42")).toBe("/page/2");
  });
});

// The contract suite on the example's sink: one server per case, so cases do not share entries.
const servers = new Map<string, KeyValueServer>();
const serverOf = (id: string): KeyValueServer => {
  const server = servers.get(id);
  if (server === undefined) throw new Error(`no server for case ${id}`);
  return server;
};

describeTwoPhaseCommitSink<Entry>({
  name: "HttpKeyValueSink",
  setup: async (scope) => {
    servers.set(scope.id, await startKeyValueServer());
  },
  teardown: async (scope) => {
    await servers.get(scope.id)?.close();
    servers.delete(scope.id);
  },
  createSink: (scope) =>
    new HttpKeyValueSink(serverOf(scope.id).url) as unknown as TwoPhaseCommitSink<Entry, unknown>,
  readCommitted: (scope) => [...serverOf(scope.id).entries].map(([key, value]) => ({ key, value })),
  createRecord: (index) => ({ key: `k${index}`, value: `v${index}` }),
  // The store overwrites by key: a replay never doubles.
  idempotentByKey: true,
});
