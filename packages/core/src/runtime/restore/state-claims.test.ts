import { serialize } from "node:v8";
import { describe, expect, it } from "vitest";
import { isOnceflowError, NonRestoredStateError } from "../../errors/onceflow-error.js";
import { createMemoryLogger } from "../../observability/logger.js";
import { TRANSACTION_STATE_NAME, type TransactionStateEntry } from "../../sink/transaction-state.js";
import type { OperatorSnapshot } from "../operators/stream-operator.js";
import { checkStateClaims, claimRedistributedState, findNonRestoredState } from "./state-claims.js";

const transaction = (kind: "pending" | "open", checkpointId: number, subtaskIndex = 0): Buffer =>
  serialize({
    kind,
    checkpointId,
    transaction: serialize({ transactionalId: `out-${subtaskIndex}-${checkpointId}` }),
    startedAt: 1_000 + checkpointId,
    subtaskIndex,
    parallelism: 1,
  } satisfies TransactionStateEntry);

const source: OperatorSnapshot = {
  splits: [{ splitKey: "numbers/0", bytes: Buffer.from("position"), maxTimestamp: undefined }],
};
const keyed: OperatorSnapshot = {
  keyed: { "numbers/0": { count: Buffer.from("table") } },
  eventTimers: {},
  processingTimers: {},
};
const sink = (...elements: Buffer[]): OperatorSnapshot => ({
  operatorState: { [TRANSACTION_STATE_NAME]: { mode: "union", elements } },
});
const buffered: OperatorSnapshot = {
  operatorState: { buffer: { mode: "split", elements: [Buffer.from("x")] } },
};

describe("findNonRestoredState", () => {
  it("names each unclaimed uid with the kinds of state it holds", () => {
    const restored = new Map([
      [0, { numbers: source, count: keyed, out: sink(transaction("pending", 4), transaction("open", 4)) }],
    ]);
    expect(findNonRestoredState(restored, ["numbers", "count", "out"])).toEqual([]);
    expect(findNonRestoredState(restored, ["numbers-v2", "count-v2", "out-v2"])).toEqual([
      {
        uid: "count",
        kinds: ["keyed state"],
        subtasks: [0],
        pendingTransactions: [],
        openTransactions: 0,
      },
      {
        uid: "numbers",
        kinds: ["source positions"],
        subtasks: [0],
        pendingTransactions: [],
        openTransactions: 0,
      },
      {
        uid: "out",
        kinds: ["sink transactions"],
        subtasks: [0],
        pendingTransactions: [{ checkpointId: 4, transaction: '{"transactionalId":"out-0-4"}' }],
        openTransactions: 1,
      },
    ]);
  });

  it("tells operator state from sink transactions, and timers count as keyed state", () => {
    const restored = new Map([
      [
        0,
        {
          both: {
            operatorState: { ...buffered.operatorState, ...sink(transaction("open", 2)).operatorState },
          },
          timers: { keyed: {}, eventTimers: { "numbers/0": [{ key: "a", time: 5 }] } },
        },
      ],
    ]);
    expect(findNonRestoredState(restored, []).map(({ uid, kinds }) => ({ uid, kinds }))).toEqual([
      { uid: "both", kinds: ["operator state", "sink transactions"] },
      { uid: "timers", kinds: ["keyed state"] },
    ]);
  });

  it("leaves out empty state, as Flink does: an operator that kept nothing loses nothing", () => {
    const restored = new Map([
      [
        0,
        {
          map: {},
          emptyList: { operatorState: { buffer: { mode: "split" as const, elements: [] } } },
          emptyKeyed: { keyed: { "numbers/0": {} }, eventTimers: { "numbers/0": [] }, processingTimers: {} },
          noSplits: { splits: [] },
        },
      ],
      [1, undefined],
    ]);
    expect(findNonRestoredState(restored, [])).toEqual([]);
  });

  it("counts a union state that every subtask received after a rescale once, and lists every subtask", () => {
    const union = sink(transaction("pending", 7, 0), transaction("pending", 7, 1), transaction("open", 7, 0));
    const restored = new Map<number, Record<string, OperatorSnapshot>>([
      [2, { out: union }],
      [0, { out: union }],
      [1, { out: union, count: keyed }],
    ]);
    const [count, out] = findNonRestoredState(restored, []);
    expect(count).toMatchObject({ uid: "count", subtasks: [1] });
    expect(out).toMatchObject({ uid: "out", subtasks: [0, 1, 2], openTransactions: 1 });
    expect(out?.pendingTransactions.map((pending) => pending.checkpointId)).toEqual([7, 7]);
  });

  it("does not count what describes the state (scalars beside it) as state", () => {
    const described = { keyedBy: "key-group", maxParallelism: 128, keyed: {} } as OperatorSnapshot;
    expect(findNonRestoredState(new Map([[0, { count: described }]]), [])).toEqual([]);
  });

  it("counts a field it does not know as state, so that nothing is dropped unseen", () => {
    const restored = new Map([
      [0, { future: { keyGroupState: { 3: Buffer.from("x") } } as OperatorSnapshot }],
    ]);
    expect(findNonRestoredState(restored, [])).toMatchObject([{ uid: "future", kinds: ["operator state"] }]);
  });
});

describe("checkStateClaims", () => {
  const restored = new Map([[0, { numbers: source, count: keyed, out: sink(transaction("pending", 4)) }]]);

  it("refuses the restore with NON_RESTORED_STATE naming each unclaimed state and the fix", () => {
    const logger = createMemoryLogger();
    let caught: unknown;
    try {
      checkStateClaims({
        jobId: "orders",
        checkpointId: 4,
        restored,
        claimedUids: ["numbers", "count-v2", "out-v2"],
        allowNonRestoredState: false,
        logger,
      });
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(NonRestoredStateError);
    const error = caught as NonRestoredStateError;
    expect(isOnceflowError(error) && error.code).toBe("NON_RESTORED_STATE");
    expect(error.checkpointId).toBe(4);
    expect(error.operators.map((state) => state.uid)).toEqual(["count", "out"]);
    expect(error.details).toMatchObject({ checkpointId: 4, operators: error.operators });
    expect(error.message).toContain("checkpoint 4 holds state that no operator of the job claims");
    expect(error.message).toContain("operator 'count' (keyed state; subtask 0)");
    expect(error.message).toContain(
      "operator 'out' (sink transactions: 1 pending (checkpoint 4); subtask 0)",
    );
    expect(error.message).toContain("the job's operators are 'numbers', 'count-v2', 'out-v2'");
    expect(error.message).toContain("allowNonRestoredState: true (onceflow run --allow-non-restored-state)");
    expect(error.message).toContain("pending transactions are not committed");
    expect(logger.entries).toEqual([]);
  });

  it("with allowNonRestoredState drops it with a warning that names it and its transactions", () => {
    const logger = createMemoryLogger();
    const dropped = checkStateClaims({
      jobId: "orders",
      checkpointId: 4,
      restored,
      claimedUids: ["numbers", "count-v2", "out-v2"],
      allowNonRestoredState: true,
      logger,
    });
    expect(dropped.map((state) => state.uid)).toEqual(["count", "out"]);
    expect(logger.entries).toHaveLength(1);
    const [warning] = logger.entries;
    expect(warning?.level).toBe("warn");
    expect(warning?.message).toContain("dropping state of checkpoint 4 that no operator of the job claims");
    expect(warning?.message).toContain("operator 'count' (keyed state");
    expect(warning?.message).toContain("its pending ones are not committed by this job");
    expect(warning?.message).toContain(
      `Pending transactions given up: 'out' checkpoint 4: {"transactionalId":"out-0-4"}`,
    );
    expect(warning?.fields).toMatchObject({ checkpointId: 4, dropped });
  });

  it("passes a fresh start and state that every operator claims", () => {
    const logger = createMemoryLogger();
    const check = { jobId: "orders", restored, allowNonRestoredState: false, logger };
    expect(checkStateClaims({ ...check, checkpointId: undefined, claimedUids: [] })).toEqual([]);
    expect(checkStateClaims({ ...check, checkpointId: 4, claimedUids: ["numbers", "count", "out"] })).toEqual(
      [],
    );
    expect(logger.entries).toEqual([]);
  });
});

describe("claimRedistributedState", () => {
  const perSubtask = new Map([
    [0, { numbers: source, count: keyed }],
    [1, { numbers: source, count: keyed }],
  ]);
  const claims = { jobId: "orders", claimedUids: ["numbers", "count-v2"], logger: createMemoryLogger() };

  it("refuses a rescale's state that no operator claims, naming the newest checkpoint it comes from", () => {
    const from = [{ checkpointId: 8 }, { checkpointId: 9 }];
    expect(() =>
      claimRedistributedState({ ...claims, allowNonRestoredState: false }, perSubtask, from),
    ).toThrow(
      "checkpoint 9 holds state that no operator of the job claims: operator 'count' (keyed state; subtask 0, 1)",
    );
  });

  it("allowed, leaves the unclaimed state out of what is stored, with one warning", () => {
    const logger = createMemoryLogger();
    const stored = new Map(perSubtask);
    claimRedistributedState({ ...claims, allowNonRestoredState: true, logger }, stored, [
      { checkpointId: 9 },
    ]);
    expect(stored).toEqual(
      new Map([
        [0, { numbers: source }],
        [1, { numbers: source }],
      ]),
    );
    expect(logger.entries.map((entry) => entry.level)).toEqual(["warn"]);
  });
});
