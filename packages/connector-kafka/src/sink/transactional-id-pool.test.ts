import { describe, expect, it } from "vitest";
import { TransactionalIdPool } from "./transactional-id-pool.js";

describe("TransactionalIdPool ids", () => {
  it("names prefix-subtask-incarnation-slot and parses it back (also the format without incarnation)", () => {
    const pool = new TransactionalIdPool("orders-out", 1, 17, 3);
    expect(pool.idOf(2)).toBe("orders-out-1-17-2");
    expect(TransactionalIdPool.parse("orders-out", "orders-out-1-17-2")).toEqual({
      subtaskIndex: 1,
      incarnation: 17,
      slot: 2,
    });
    expect(TransactionalIdPool.parse("orders-out", "orders-out-1-2")).toEqual({
      subtaskIndex: 1,
      incarnation: undefined,
      slot: 2,
    });
    for (const other of [
      "orders-out-1-17-2-0",
      "orders-out-a-1-2",
      "orders-outx-1-2-3",
      "orders-out-01-2-3",
    ]) {
      expect(TransactionalIdPool.parse("orders-out", other)).toBeUndefined();
    }
  });

  it("knows its own slots only: another subtask's, another incarnation's or a slot beyond the pool are not", () => {
    const pool = new TransactionalIdPool("p", 0, 5, 3);
    expect(pool.slotOf("p-0-5-1")).toBe(1);
    expect(pool.slotOf("p-0-4-1")).toBeUndefined();
    expect(pool.slotOf("p-1-5-1")).toBeUndefined();
    expect(pool.slotOf("p-0-5-3")).toBeUndefined();
    expect(pool.slotOf("p-0-1")).toBeUndefined();
  });
});
