import { describe, expect, it } from "vitest";
import { ConfigurationError } from "../errors/onceflow-error.js";
import type { Sink } from "../sink/sink.js";
import { GeneratorSource } from "../source/generator-source.js";
import { Job } from "./job.js";

// Start to first checkpoint: the subtasks of one process start side by side — one after
// another, a Kafka job at parallelism 2 took seconds longer to its first checkpoint.

/** How long a sink's `open` waits for its sibling's before it says it opened alone. */
const SIBLING_WAIT_MS = 2_000;

/** Sinks that record which subtasks opened, which one opened while no other had, and closes. */
function recordingSinks(parallelism: number, failOpenOf?: number) {
  const opening = new Set<number>();
  const openedAlone: number[] = [];
  const closed: number[] = [];
  let everyoneOpening: () => void = () => {};
  const allOpening = new Promise<void>((resolve) => {
    everyoneOpening = resolve;
  });
  const factory = ({ subtaskIndex }: { subtaskIndex: number }): Sink<number> => ({
    async open() {
      opening.add(subtaskIndex);
      if (opening.size === parallelism) everyoneOpening();
      let timer: NodeJS.Timeout | undefined;
      const together = await Promise.race([
        allOpening.then(() => true),
        new Promise<boolean>((resolve) => {
          timer = setTimeout(() => resolve(false), SIBLING_WAIT_MS);
        }),
      ]);
      clearTimeout(timer);
      if (!together) openedAlone.push(subtaskIndex);
      if (subtaskIndex === failOpenOf)
        throw new ConfigurationError("sink", `subtask ${subtaskIndex} refuses to open`);
    },
    write() {},
    close() {
      closed.push(subtaskIndex);
    },
  });
  return { factory, openedAlone, closed };
}

function jobWith(parallelism: number, sink: ReturnType<typeof recordingSinks>): Job {
  const job = new Job({
    jobId: `subtask-start-${parallelism}`,
    parallelism,
    checkpointing: { interval: 50, storage: "memory" },
    restartStrategy: { type: "none" },
  });
  job
    .fromSource(new GeneratorSource<number>({ count: 100, splits: parallelism, generate: (i) => i }), {
      uid: "numbers",
    })
    .sinkTo(sink.factory, { uid: "out" });
  return job;
}

describe("the subtasks of one process", () => {
  it("start side by side: each sink's open runs while the others' do", async () => {
    const sink = recordingSinks(3);
    await jobWith(3, sink).execute();
    expect(sink.openedAlone).toEqual([]);
    expect(sink.closed.sort()).toEqual([0, 1, 2]);
  }, 20_000);

  it("when one fails to start, the attempt fails with its error and the others that started are closed", async () => {
    const sink = recordingSinks(3, 1);
    const error = await jobWith(3, sink)
      .execute()
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as ConfigurationError).message).toMatch(/subtask 1 refuses to open/);
    expect(sink.closed).toEqual(expect.arrayContaining([0, 2]));
  }, 20_000);
});
