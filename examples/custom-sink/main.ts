// Run: npx tsx examples/custom-sink/main.ts
// A generator of page views, counted per page, written exactly once into an HTTP key-value store
// (started here, on 127.0.0.1) by a custom TwoPhaseCommitSink.
import { GeneratorSource, Job } from "@onceflow/core";
import { HttpKeyValueSink } from "./http-key-value-sink.js";
import { startKeyValueServer } from "./kv-server.js";

/** Runs the pipeline against a fresh server and returns what the server published. */
export async function runCustomSinkExample(views = 5000): Promise<Map<string, unknown>> {
  const server = await startKeyValueServer();
  try {
    const job = new Job({
      jobId: "custom-sink-example",
      checkpointing: { interval: 200, storage: "memory" },
    });
    job
      .fromSource(
        new GeneratorSource({
          count: views,
          splits: 2,
          generate: (index) => ({ page: `/page/${index % 10}`, index }),
        }),
        { uid: "views" },
      )
      // Every view becomes its own key: a replay after a failure overwrites, it never doubles.
      .map((view) => ({ key: `view:${view.index}`, value: view.page }), { uid: "to-entry" })
      .sinkTo(() => new HttpKeyValueSink(server.url), { uid: "kv" });
    await job.execute();
    return new Map(server.entries);
  } finally {
    await server.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const published = await runCustomSinkExample();
  const perPage = new Map<string, number>();
  for (const page of published.values()) perPage.set(String(page), (perPage.get(String(page)) ?? 0) + 1);
  console.log(`published ${published.size} entries exactly once`);
  for (const [page, count] of [...perPage].sort()) console.log(`${page}\t${count}`);
}
