import { describe, expect, it } from "vitest";
import { ConfigurationError } from "../errors/onceflow-error.js";
import { getWindowStartWithOffset, TimeWindow } from "./time-window.js";
import {
  SlidingEventTimeWindows,
  SlidingProcessingTimeWindows,
  TumblingEventTimeWindows,
  TumblingProcessingTimeWindows,
  type WindowAssigner,
} from "./window-assigners.js";

const plain = (windows: TimeWindow[]) =>
  windows.map((w) => [w.start, w.end]).sort((a, b) => (a[0] ?? 0) - (b[0] ?? 0));

describe("TimeWindow", () => {
  it("is [start, end) with maxTimestamp = end − 1", () => {
    const window = new TimeWindow(0, 1000);
    expect(window.maxTimestamp()).toBe(999);
    expect(window.contains(0)).toBe(true);
    expect(window.contains(999)).toBe(true);
    expect(window.contains(1000)).toBe(false);
    expect(window.contains(-1)).toBe(false);
    expect(window.equals(new TimeWindow(0, 1000))).toBe(true);
    expect(window.equals(new TimeWindow(0, 999))).toBe(false);
    expect(window.intersects(new TimeWindow(1000, 2000))).toBe(true);
    expect(window.intersects(new TimeWindow(1001, 2000))).toBe(false);
    expect(window.toString()).toBe("TimeWindow{start=0, end=1000}");
  });

  it("getWindowStartWithOffset matches Flink for positive, negative and offset timestamps", () => {
    expect(getWindowStartWithOffset(0, 0, 60)).toBe(0);
    expect(getWindowStartWithOffset(59, 0, 60)).toBe(0);
    expect(getWindowStartWithOffset(60, 0, 60)).toBe(60);
    expect(getWindowStartWithOffset(-1, 0, 60)).toBe(-60);
    expect(getWindowStartWithOffset(-60, 0, 60)).toBe(-60);
    expect(getWindowStartWithOffset(-61, 0, 60)).toBe(-120);
    expect(getWindowStartWithOffset(14, 15, 60)).toBe(-45);
    expect(getWindowStartWithOffset(15, 15, 60)).toBe(15);
    expect(getWindowStartWithOffset(15, -15, 60)).toBe(-15);
    expect(getWindowStartWithOffset(45, -15, 60)).toBe(45);
  });
});

describe("TumblingEventTimeWindows", () => {
  it("puts each timestamp in exactly the window containing it", () => {
    const assigner = TumblingEventTimeWindows.of(5000);
    expect(plain(assigner.assignWindows(0))).toEqual([[0, 5000]]);
    expect(plain(assigner.assignWindows(4999))).toEqual([[0, 5000]]);
    expect(plain(assigner.assignWindows(5000))).toEqual([[5000, 10000]]);
    expect(assigner.isEventTime()).toBe(true);
  });

  it("handles negative timestamps", () => {
    const assigner = TumblingEventTimeWindows.of(5000);
    expect(plain(assigner.assignWindows(-1))).toEqual([[-5000, 0]]);
    expect(plain(assigner.assignWindows(-5000))).toEqual([[-5000, 0]]);
    expect(plain(assigner.assignWindows(-5001))).toEqual([[-10000, -5000]]);
  });

  it("shifts windows by a positive or negative offset", () => {
    const positive = TumblingEventTimeWindows.of(5000, 100);
    expect(plain(positive.assignWindows(99))).toEqual([[-4900, 100]]);
    expect(plain(positive.assignWindows(100))).toEqual([[100, 5100]]);
    expect(plain(positive.assignWindows(5099))).toEqual([[100, 5100]]);
    const negative = TumblingEventTimeWindows.of(5000, -100);
    expect(plain(negative.assignWindows(4899))).toEqual([[-100, 4900]]);
    expect(plain(negative.assignWindows(4900))).toEqual([[4900, 9900]]);
  });

  it("every window contains the timestamp and has the size, over a range of timestamps", () => {
    const assigner = TumblingEventTimeWindows.of(7, 3);
    for (let ts = -50; ts <= 50; ts++) {
      const [window, ...rest] = assigner.assignWindows(ts);
      expect(rest).toEqual([]);
      expect(window?.contains(ts)).toBe(true);
      expect((window?.end ?? 0) - (window?.start ?? 0)).toBe(7);
      expect(((((window?.start ?? 0) - 3) % 7) + 7) % 7).toBe(0);
    }
  });

  it("rejects sizes ≤ 0 and |offset| ≥ size", () => {
    expect(() => TumblingEventTimeWindows.of(0)).toThrow(ConfigurationError);
    expect(() => TumblingEventTimeWindows.of(-5)).toThrow(/window\.size/);
    expect(() => TumblingEventTimeWindows.of(1.5)).toThrow(/window\.size/);
    expect(() => TumblingEventTimeWindows.of(10, 10)).toThrow(/window\.offset/);
    expect(() => TumblingEventTimeWindows.of(10, -10)).toThrow(/window\.offset/);
    expect(() => TumblingEventTimeWindows.of(10, 9)).not.toThrow();
  });

  it("prints Flink's name", () => {
    expect(TumblingEventTimeWindows.of(60_000).toString()).toBe("TumblingEventTimeWindows(60000)");
    expect(TumblingEventTimeWindows.of(60_000, 5).toString()).toBe("TumblingEventTimeWindows(60000, 5)");
  });
});

describe("SlidingEventTimeWindows", () => {
  it("puts a timestamp in size/slide overlapping windows", () => {
    const assigner = SlidingEventTimeWindows.of(5000, 1000);
    expect(plain(assigner.assignWindows(0))).toEqual([
      [-4000, 1000],
      [-3000, 2000],
      [-2000, 3000],
      [-1000, 4000],
      [0, 5000],
    ]);
    expect(plain(assigner.assignWindows(4999))).toEqual([
      [0, 5000],
      [1000, 6000],
      [2000, 7000],
      [3000, 8000],
      [4000, 9000],
    ]);
    expect(assigner.isEventTime()).toBe(true);
  });

  it("handles a size that is not a multiple of the slide", () => {
    const assigner = SlidingEventTimeWindows.of(5000, 2000);
    expect(plain(assigner.assignWindows(1000))).toEqual([
      [-2000, 3000],
      [0, 5000],
    ]);
    expect(plain(assigner.assignWindows(4000))).toEqual([
      [0, 5000],
      [2000, 7000],
      [4000, 9000],
    ]);
  });

  it("with slide > size leaves gaps where timestamps have no window", () => {
    const assigner = SlidingEventTimeWindows.of(1000, 5000);
    expect(plain(assigner.assignWindows(500))).toEqual([[0, 1000]]);
    expect(plain(assigner.assignWindows(1500))).toEqual([]);
  });

  it("handles negative timestamps and offsets", () => {
    const assigner = SlidingEventTimeWindows.of(10, 5, 2);
    expect(plain(assigner.assignWindows(-1))).toEqual([
      [-8, 2],
      [-3, 7],
    ]);
    expect(plain(assigner.assignWindows(-3))).toEqual([
      [-8, 2],
      [-3, 7],
    ]);
  });

  it("every assigned window contains the timestamp, and no containing window is missed", () => {
    const assigner = SlidingEventTimeWindows.of(12, 4, 1);
    for (let ts = -40; ts <= 40; ts++) {
      const windows = assigner.assignWindows(ts);
      expect(windows).toHaveLength(3);
      for (const window of windows) {
        expect(window.contains(ts)).toBe(true);
        expect((((window.start - 1) % 4) + 4) % 4).toBe(0);
      }
    }
  });

  it("rejects bad sizes, slides and offsets", () => {
    expect(() => SlidingEventTimeWindows.of(0, 1)).toThrow(/window\.size/);
    expect(() => SlidingEventTimeWindows.of(10, 0)).toThrow(/window\.slide/);
    expect(() => SlidingEventTimeWindows.of(10, 5, 5)).toThrow(/window\.offset/);
    expect(() => SlidingEventTimeWindows.of(10, 5, -4)).not.toThrow();
  });

  it("prints Flink's name", () => {
    expect(SlidingEventTimeWindows.of(10, 5).toString()).toBe("SlidingEventTimeWindows(10, 5)");
  });
});

describe("processing-time assigners", () => {
  it("assign like their event-time twins but are not event time", () => {
    const pairs: Array<[WindowAssigner, WindowAssigner]> = [
      [TumblingProcessingTimeWindows.of(1000), TumblingEventTimeWindows.of(1000)],
      [TumblingProcessingTimeWindows.of(1000, 10), TumblingEventTimeWindows.of(1000, 10)],
      [SlidingProcessingTimeWindows.of(1000, 250), SlidingEventTimeWindows.of(1000, 250)],
      [SlidingProcessingTimeWindows.of(1000, 250, -3), SlidingEventTimeWindows.of(1000, 250, -3)],
    ];
    for (const [processing, event] of pairs) {
      expect(processing.isEventTime()).toBe(false);
      for (const ts of [-1234, -1, 0, 1, 999, 1000, 1_700_000_000_123]) {
        expect(plain(processing.assignWindows(ts))).toEqual(plain(event.assignWindows(ts)));
      }
    }
    expect(TumblingProcessingTimeWindows.of(1000).toString()).toBe("TumblingProcessingTimeWindows(1000)");
    expect(SlidingProcessingTimeWindows.of(1000, 250).toString()).toBe(
      "SlidingProcessingTimeWindows(1000, 250)",
    );
  });

  it("validate like the event-time ones", () => {
    expect(() => TumblingProcessingTimeWindows.of(0)).toThrow(ConfigurationError);
    expect(() => SlidingProcessingTimeWindows.of(10, 20, 20)).toThrow(/window\.offset/);
  });
});
