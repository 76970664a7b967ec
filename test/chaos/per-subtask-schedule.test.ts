import { describe, expect, it } from "vitest";
import { planSchedule } from "./per-subtask-schedule.js";

// The seeded schedule of the per-subtask chaos: every requested fault is planned, on a subtask that
// exists in its segment, and faults only containers can suffer leave a process run's schedule alone.

const count = (seed: number, options: { networkPartitions?: number; brokerKills?: number }) => {
  const events = planSchedule({ seed, kills: 40, zombies: 6, parallelisms: [2, 3, 2], ...options }).flatMap(
    (segment) => segment.events.map((event) => ({ ...event, parallelism: segment.parallelism })),
  );
  return {
    events,
    byKind: events.reduce<Record<string, number>>((counts, event) => {
      counts[event.kind] = (counts[event.kind] ?? 0) + 1;
      return counts;
    }, {}),
  };
};

describe("per-subtask chaos schedule", () => {
  it("plans every kill, freeze, partition and broker kill, each on a subtask of its segment", () => {
    for (const seed of [1, 2, 3, 20261205]) {
      const { events, byKind } = count(seed, { networkPartitions: 5, brokerKills: 2 });
      expect(byKind).toEqual({ kill: 40, zombie: 6, partition: 5, "broker-kill": 2 });
      for (const event of events) {
        expect(event.subtask).toBeGreaterThanOrEqual(0);
        expect(event.subtask).toBeLessThan(event.parallelism);
        if (event.kind === "partition") expect(event.cutMs).toBeGreaterThanOrEqual(1000);
      }
    }
  });

  it("gives a seed the same schedule as before when no container faults are asked for", () => {
    const plain = planSchedule({ seed: 7, kills: 12, zombies: 2 });
    expect(planSchedule({ seed: 7, kills: 12, zombies: 2, networkPartitions: 0, brokerKills: 0 })).toEqual(
      plain,
    );
    expect(planSchedule({ seed: 7, kills: 12, zombies: 2 })).toEqual(plain);
    expect(count(7, {}).byKind).toEqual({ kill: 40, zombie: 6 });
  });
});
