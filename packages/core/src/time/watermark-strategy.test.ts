import { describe, expect, it } from "vitest";
import { ConfigurationError } from "../errors/onceflow-error.js";
import {
  CombinedWatermark,
  resolveWatermarkStrategy,
  WatermarkGenerator,
  WatermarkStrategy,
  WatermarkStrategyBuilder,
} from "./watermark-strategy.js";

interface Click {
  user: string;
  at: number;
}

describe("WatermarkStrategy", () => {
  it("builds the options object step by step, each step a new strategy", () => {
    const base = WatermarkStrategy.forBoundedOutOfOrderness<Click>(5000);
    const assigner = (click: Click) => click.at;
    const full = base.withTimestampAssigner(assigner).withIdleness(60_000);
    expect(base.timestampAssigner).toBeUndefined();
    expect(base.idleness).toBeUndefined();
    expect(full.maxOutOfOrderness).toBe(5000);
    expect(full.idleness).toBe(60_000);
    expect(full.timestampAssigner?.({ user: "a", at: 42 }, undefined)).toBe(42);
    expect(full).toBeInstanceOf(WatermarkStrategyBuilder);
  });

  it("forMonotonousTimestamps has no out-of-orderness", () => {
    expect(WatermarkStrategy.forMonotonousTimestamps<Click>().maxOutOfOrderness).toBe(0);
  });

  it("resolves defaults for a plain object", () => {
    expect(resolveWatermarkStrategy({})).toEqual({
      timestampAssigner: undefined,
      maxOutOfOrderness: 0,
      idleness: undefined,
    });
  });

  it("rejects bad settings with a ConfigurationError naming them", () => {
    expect(() => WatermarkStrategy.forBoundedOutOfOrderness(-1)).toThrow(ConfigurationError);
    expect(() => WatermarkStrategy.forBoundedOutOfOrderness(Number.NaN)).toThrow(
      /watermarkStrategy\.maxOutOfOrderness/,
    );
    expect(() => WatermarkStrategy.forMonotonousTimestamps().withIdleness(0)).toThrow(
      /watermarkStrategy\.idleness/,
    );
    expect(() => resolveWatermarkStrategy({ timestampAssigner: 5 as unknown as () => number })).toThrow(
      /watermarkStrategy\.timestampAssigner/,
    );
  });
});

describe("WatermarkGenerator", () => {
  it("is -Infinity before the first event", () => {
    expect(new WatermarkGenerator({ maxOutOfOrderness: 10 }).currentWatermark()).toBe(
      Number.NEGATIVE_INFINITY,
    );
  });

  it("is maxTimestamp − maxOutOfOrderness − 1 and never goes back", () => {
    const generator = new WatermarkGenerator({ maxOutOfOrderness: 100 });
    generator.onEvent(1000);
    expect(generator.currentWatermark()).toBe(899);
    generator.onEvent(500); // out of order: no effect
    expect(generator.currentWatermark()).toBe(899);
    generator.onEvent(1500);
    expect(generator.currentWatermark()).toBe(1399);
  });

  it("defaults to out-of-orderness 0 (watermark = max − 1)", () => {
    const generator = new WatermarkGenerator();
    generator.onEvent(-50);
    expect(generator.currentWatermark()).toBe(-51);
  });

  it("becomes idle after `idleness` without activity and active again on activity", () => {
    const generator = new WatermarkGenerator({ idleness: 1000 }, 10_000);
    expect(generator.isIdle(10_999)).toBe(false);
    expect(generator.isIdle(11_000)).toBe(true);
    generator.markActivity(11_500);
    expect(generator.isIdle(12_000)).toBe(false);
    expect(generator.isIdle(12_500)).toBe(true);
  });

  it("is never idle without idleness, nor before its start is known", () => {
    expect(new WatermarkGenerator({}, 0).isIdle(1e12)).toBe(false);
    expect(new WatermarkGenerator({ idleness: 10 }).isIdle(1e12)).toBe(false);
  });

  it("snapshots its max timestamp as plain JSON-safe data and restores it", () => {
    const empty = new WatermarkGenerator({ maxOutOfOrderness: 5 });
    expect(JSON.parse(JSON.stringify(empty.snapshot()))).toEqual({ maxTimestamp: null });

    const generator = new WatermarkGenerator({ maxOutOfOrderness: 5 });
    generator.onEvent(700);
    const snapshot = JSON.parse(JSON.stringify(generator.snapshot()));
    expect(snapshot).toEqual({ maxTimestamp: 700 });

    const restored = new WatermarkGenerator({ maxOutOfOrderness: 5 });
    restored.restore(snapshot);
    expect(restored.currentWatermark()).toBe(694);
    restored.onEvent(600);
    expect(restored.currentWatermark()).toBe(694);

    restored.restore({ maxTimestamp: null });
    expect(restored.currentWatermark()).toBe(Number.NEGATIVE_INFINITY);
  });
});

describe("CombinedWatermark", () => {
  it("is the minimum over the splits", () => {
    const combined = new CombinedWatermark();
    expect(combined.currentWatermark()).toBe(Number.NEGATIVE_INFINITY);
    combined.setSplit("a", 100, false);
    combined.setSplit("b", 50, false);
    expect(combined.update()).toBe(true);
    expect(combined.currentWatermark()).toBe(50);
    combined.setSplit("b", 80, false);
    expect(combined.update()).toBe(true);
    expect(combined.currentWatermark()).toBe(80);
  });

  it("a split without events holds the watermark at -Infinity", () => {
    const combined = new CombinedWatermark();
    combined.setSplit("a", 100, false);
    combined.setSplit("b", Number.NEGATIVE_INFINITY, false);
    expect(combined.update()).toBe(false);
    expect(combined.currentWatermark()).toBe(Number.NEGATIVE_INFINITY);
  });

  it("leaves idle splits out", () => {
    const combined = new CombinedWatermark();
    combined.setSplit("a", 100, false);
    combined.setSplit("b", 10, true);
    combined.update();
    expect(combined.currentWatermark()).toBe(100);
  });

  it("does not move when every split is idle", () => {
    const combined = new CombinedWatermark();
    combined.setSplit("a", 100, false);
    combined.update();
    combined.setSplit("a", 300, true);
    combined.setSplit("b", 200, true);
    expect(combined.update()).toBe(false);
    expect(combined.currentWatermark()).toBe(100);
  });

  it("never goes back, even when a split that was idle returns behind", () => {
    const combined = new CombinedWatermark();
    combined.setSplit("a", 100, false);
    combined.setSplit("b", 10, true);
    combined.update();
    combined.setSplit("b", 20, false);
    expect(combined.update()).toBe(false);
    expect(combined.currentWatermark()).toBe(100);
  });

  it("counts finished splits as +Infinity; all finished gives +Infinity", () => {
    const combined = new CombinedWatermark();
    combined.setSplit("a", 100, false);
    combined.setSplit("b", 40, false);
    combined.markSplitFinished("b");
    combined.update();
    expect(combined.currentWatermark()).toBe(100);
    combined.markSplitFinished("a");
    combined.update();
    expect(combined.currentWatermark()).toBe(Number.POSITIVE_INFINITY);
  });

  it("forgets removed splits and stays put with none", () => {
    const combined = new CombinedWatermark();
    combined.setSplit("a", 100, false);
    combined.setSplit("b", 40, false);
    combined.update();
    combined.removeSplit("b");
    combined.update();
    expect(combined.currentWatermark()).toBe(100);
    combined.removeSplit("a");
    expect(combined.update()).toBe(false);
    expect(combined.currentWatermark()).toBe(100);
  });

  it("continues from a snapshot without going back", () => {
    const combined = new CombinedWatermark();
    combined.setSplit("a", 500, false);
    combined.update();
    const restored = new CombinedWatermark(structuredClone(combined.snapshot()));
    expect(restored.currentWatermark()).toBe(500);
    restored.setSplit("a", 400, false);
    expect(restored.update()).toBe(false);
    expect(restored.currentWatermark()).toBe(500);
    expect(new CombinedWatermark({ watermark: null }).currentWatermark()).toBe(Number.NEGATIVE_INFINITY);
  });
});
