import { describe, expect, it } from "vitest";
import {
  fallbackTransactionalIds,
  type LingeringScope,
  selectLingeringIds,
} from "./lingering-transactions.js";

const scope: LingeringScope = {
  prefix: "orders-out",
  subtaskIndex: 0,
  parallelism: 2,
  incarnation: 7,
  recoveredSubtasks: [0, 2],
  recovered: new Set(["orders-out-0-6-1"]),
  knownIncarnations: new Set([6]),
  poolSize: 3,
};

const open = (transactionalId: string, state = "Ongoing") => ({ transactionalId, state });

describe("which transactional ids an attempt fences at start", () => {
  it("keeps open ids of owned subtasks of this or older incarnations, except recovered ones", () => {
    expect(
      selectLingeringIds(scope, [
        open("orders-out-0-6-0"), // older incarnation, own subtask
        open("orders-out-0-6-1"), // recovered just now: its epoch must stay
        open("orders-out-0-2-9"), // a larger earlier pool
        open("orders-out-2-5-0"), // old subtask 2, recovered by subtask 0
        open("orders-out-4-3-0"), // subtask 4 of a larger earlier parallelism: 4 % 2 = 0
        open("orders-out-0-4"), // the format without incarnation
        open("orders-out-0-7-0", "Empty"), // this incarnation (reused when checkpointing is off)
        open("orders-out-0-8-0"), // a newer incarnation: the process that replaced this one
        open("orders-out-1-6-0"), // subtask 1's
        open("orders-out-3-6-0"), // 3 % 2 = 1: subtask 1's
        open("orders-out-0-5-0", "CompleteCommit"), // nothing open
        open("orders-out-0-5-1", "CompleteAbort"),
        open("orders-out-x-0-5-0"), // another sink whose prefix starts with this one
        open("orders-out-extra-0-1"),
      ]),
    ).toEqual([
      "orders-out-0-6-0",
      "orders-out-0-2-9",
      "orders-out-2-5-0",
      "orders-out-4-3-0",
      "orders-out-0-4",
      "orders-out-0-7-0",
    ]);
  });

  it("fences ids of incarnations the checkpoint storage never handed out (the run before a reset of the storage)", () => {
    const listed = [open("orders-out-0-40-0"), open("orders-out-0-8-0"), open("orders-out-1-40-0")];
    // The storage's newest is 8: 40 is of the series before the reset; 8 is the process that replaced this one.
    expect(selectLingeringIds(scope, listed, 8)).toEqual(["orders-out-0-40-0"]);
    // Without the storage's word, every higher incarnation is taken for a newer process's.
    expect(selectLingeringIds(scope, listed)).toEqual([]);
  });

  it("without ListTransactions, names every slot of the known incarnations, its own and the old format", () => {
    expect(fallbackTransactionalIds({ ...scope, recoveredSubtasks: [0] })).toEqual([
      "orders-out-0-6-0",
      "orders-out-0-6-2",
      "orders-out-0-7-0",
      "orders-out-0-7-1",
      "orders-out-0-7-2",
      "orders-out-0-0",
      "orders-out-0-1",
      "orders-out-0-2",
    ]);
    expect(
      fallbackTransactionalIds({ ...scope, knownIncarnations: new Set([9]), recoveredSubtasks: [0] }),
    ).not.toContain("orders-out-0-9-0");
  });
});
