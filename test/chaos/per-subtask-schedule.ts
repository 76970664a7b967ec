import { seededRandom } from "./chaos-runner.js";

// The seeded schedule of a one-process-per-subtask chaos run: three segments at parallelisms
// P → Q → P, each started in random or StatefulSet order, with SIGKILLs and zombies spread over them
// and a SIGTERM or SIGKILL of every process between segments (the rescale). Where the subtasks run as
// containers the schedule also holds network partitions of one subtask and kills of the broker. The
// same seed gives the same schedule (what happens inside the processes still depends on timing).

/**
 * One thing the chaos does to a subtask's process, `afterMs` after the previous event — or, with
 * `afterReady`, `afterMs` after that process is ready (otherwise kills land mostly in startup).
 */
export type ChaosEvent =
  | {
      readonly kind: "kill";
      readonly afterMs: number;
      readonly afterReady: boolean;
      readonly subtask: number;
      readonly restartAfterMs: number;
    }
  | {
      readonly kind: "zombie";
      readonly afterMs: number;
      readonly afterReady: boolean;
      readonly subtask: number;
      /** How long it stays frozen: from the freeze, or from its replacement being ready. */
      readonly frozenMs: number;
      readonly frozenUntilReplacementReady: boolean;
    }
  | {
      /** The subtask's container cut off the network for `cutMs`, then connected again. */
      readonly kind: "partition";
      readonly afterMs: number;
      readonly afterReady: boolean;
      readonly subtask: number;
      readonly cutMs: number;
    }
  | {
      /** The broker SIGKILLed, started again after `downMs`. */
      readonly kind: "broker-kill";
      readonly afterMs: number;
      readonly afterReady: boolean;
      readonly subtask: number;
      readonly downMs: number;
    };

/** The processes of one parallelism, from their start to their stop. */
export interface Segment {
  readonly parallelism: number;
  /** `random`: all at once in `order` with `gapsMs` between; `ordered`: each once the previous is ready. */
  readonly start: "random" | "ordered";
  readonly order: readonly number[];
  readonly gapsMs: readonly number[];
  readonly events: readonly ChaosEvent[];
  /** How the segment ends (a rescale); `undefined` for the last one, which runs to the end. */
  readonly stop: "SIGTERM" | "SIGKILL" | undefined;
  /** How long it runs after its last event before the stop. */
  readonly tailMs: number;
}

export interface ScheduleOptions {
  readonly seed: number;
  readonly kills: number;
  readonly zombies: number;
  /** Network partitions of one subtask (containers only; default 0). */
  readonly networkPartitions?: number;
  /** Kills of the broker (containers only; default 0). */
  readonly brokerKills?: number;
  /** Longest wait before an event (default 2500 ms). */
  readonly maxEventGapMs?: number;
  /** Longest time a zombie stays frozen (default 6000 ms; the shortest is 1000). */
  readonly maxFrozenMs?: number;
  /** Parallelisms to use instead of seeded ones (for example `[2, 3, 2]`). */
  readonly parallelisms?: readonly number[];
}

/** `items` in a seeded random order. */
export function shuffled<T>(items: readonly T[], random: () => number): T[] {
  const result = [...items];
  for (let index = result.length - 1; index > 0; index--) {
    const other = Math.floor(random() * (index + 1));
    [result[index], result[other]] = [result[other] as T, result[index] as T];
  }
  return result;
}

/** `total` spread over `parts` as evenly as possible, the remainder to the first ones. */
function spread(total: number, parts: number): number[] {
  return Array.from(
    { length: parts },
    (_, index) => Math.floor(total / parts) + (index < total % parts ? 1 : 0),
  );
}

/** The parallelisms P → Q → P: P of 2 or 3, Q another of 1…3. */
function seededParallelisms(random: () => number): number[] {
  const first = 2 + Math.floor(random() * 2);
  const others = [1, 2, 3].filter((parallelism) => parallelism !== first);
  const second = others[Math.floor(random() * others.length)] ?? 1;
  return [first, second, first];
}

/** The whole schedule of a seed. */
export function planSchedule(options: ScheduleOptions): Segment[] {
  const random = seededRandom(options.seed);
  const maxGap = options.maxEventGapMs ?? 2500;
  const maxFrozen = options.maxFrozenMs ?? 6000;
  const between = (low: number, high: number) => low + Math.floor(random() * (high - low));
  const parallelisms = options.parallelisms ?? seededParallelisms(random);
  const kills = spread(options.kills, parallelisms.length);
  const zombies = spread(options.zombies, parallelisms.length);
  const partitions = spread(options.networkPartitions ?? 0, parallelisms.length);
  const brokerKills = spread(options.brokerKills ?? 0, parallelisms.length);
  return parallelisms.map((parallelism, index) => {
    const subtasks = Array.from({ length: parallelism }, (_, subtask) => subtask);
    const kinds = shuffled(
      [
        ...Array.from({ length: kills[index] ?? 0 }, () => "kill" as const),
        ...Array.from({ length: zombies[index] ?? 0 }, () => "zombie" as const),
        ...Array.from({ length: partitions[index] ?? 0 }, () => "partition" as const),
        ...Array.from({ length: brokerKills[index] ?? 0 }, () => "broker-kill" as const),
      ],
      random,
    );
    const events: ChaosEvent[] = kinds.map((kind) => {
      const subtask = Math.floor(random() * parallelism);
      // Four kills in five and every freeze hit a process that is ready (it has checkpointed).
      if (kind === "partition")
        return {
          kind,
          afterReady: true,
          afterMs: between(0, maxGap),
          subtask,
          cutMs: between(1000, maxFrozen),
        };
      if (kind === "broker-kill")
        return { kind, afterReady: true, afterMs: between(0, maxGap), subtask, downMs: between(0, 2000) };
      return kind === "kill"
        ? {
            kind,
            afterReady: random() < 0.8,
            afterMs: between(0, maxGap),
            subtask,
            restartAfterMs: between(0, 500),
          }
        : {
            kind,
            afterReady: true,
            afterMs: between(0, maxGap),
            subtask,
            frozenMs: between(1000, maxFrozen),
            frozenUntilReplacementReady: random() < 0.5,
          };
    });
    const last = index === parallelisms.length - 1;
    const start = random() < 0.5 ? "random" : "ordered";
    return {
      parallelism,
      start,
      // A StatefulSet starts ordinals in order; otherwise any order.
      order: start === "ordered" ? subtasks : shuffled(subtasks, random),
      gapsMs: subtasks.map(() => between(0, 800)),
      events,
      stop: last ? undefined : random() < 0.5 ? "SIGTERM" : "SIGKILL",
      tailMs: between(500, 2000),
    };
  });
}

/** One line per segment, for the log. */
export function describeSegment(segment: Segment, index: number): string {
  const events = segment.events
    .map((event) => (event.kind === "broker-kill" ? "broker-kill" : `${event.kind} ${event.subtask}`))
    .join(", ");
  return `segment ${index + 1}: parallelism ${segment.parallelism}, ${segment.start} start [${segment.order.join(" ")}], ${segment.events.length} events (${events}), then ${segment.stop ?? "the last run"}`;
}
