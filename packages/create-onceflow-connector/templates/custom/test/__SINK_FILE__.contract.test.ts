import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describeTwoPhaseCommitSink } from "@onceflow/testkit/vitest";
import { afterAll, beforeAll } from "vitest";
import { __SINK_CLASS__, listStagedFiles, readCommitted } from "../src/index.js";

// The sink contract suite: 27 cases, each driving fresh sink instances the way the runtime does,
// with one failure injected (a throw in a step, a simulated kill between two steps, repeated or
// aborted notifications, a restore of an older checkpoint, two subtasks …), then checking that what
// an independent reader sees committed is exactly the input.
//
// TODO: run it against your real system. Start it through the testkit so that CI and every
// developer get the same thing (a variable naming a running one, Docker, or a local process), see
// the @onceflow/testkit README ("Where the services come from"), and give each case its own
// destination named after `scope.id` (a table, topic, key prefix or bucket).

interface Order {
  readonly id: number;
  readonly item: string;
}

let root = "";

beforeAll(async () => {
  // The stand-in system: one temporary folder per run, one directory per case.
  root = await mkdtemp(join(tmpdir(), "__SINK_FILE__-contract-"));
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describeTwoPhaseCommitSink<Order>({
  name: "__SINK_CLASS__",
  // A new instance per (simulated) process start, writing to the case's own destination.
  createSink: (scope) => new __SINK_CLASS__<Order>({ directory: join(root, scope.id) }),
  // What a reader sees committed, read independently of the sink (here: the committed files).
  readCommitted: (scope) => readCommitted<Order>(join(root, scope.id)),
  createRecord: (index) => ({ id: index, item: `item-${index}` }),
  // The leak check, after each case: staged data still there was left behind (pre-committed, then
  // neither committed nor aborted nor cleaned up by a recovery). TODO: list your system's staged
  // or prepared transactions of the case's destination.
  lingering: (scope) => listStagedFiles(join(root, scope.id)),
  // Every handle in every checkpoint is checked against this: ids and counts, never the records.
  maxTransactionHandleBytes: 1024,
  // TODO: a `kill` hook when an abandoned instance holds what the next one waits for (a connection
  // with locks): close its sockets the way a SIGKILL would, without aborting anything.
});
