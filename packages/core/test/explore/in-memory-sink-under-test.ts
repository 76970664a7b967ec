import { ModelSink } from "./model-sink.js";
import type { SinkHost, SinkUnderTest } from "./sink-under-test.js";
import { TransactionalSystem } from "./transactional-system.js";

/**
 * The in-memory {@link TransactionalSystem} with the {@link ModelSink}: every call gated, commit
 * faults injectable, notifications repeatable on a sink instance.
 *
 * @example
 * ```ts
 * const target = inMemorySinkUnderTest();
 * ```
 */
export function inMemorySinkUnderTest(): SinkUnderTest {
  const system = new TransactionalSystem();
  const sinks = new Map<string, ModelSink[]>();
  return {
    name: "memory",
    createSink(host: SinkHost) {
      const sink = new ModelSink(system, host);
      sinks.set(host.name, [...(sinks.get(host.name) ?? []), sink]);
      return sink;
    },
    async visible() {
      return [...system.visible];
    },
    async visibleByWriter() {
      return system.committed.map((each) => ({ writer: each.owner.process, values: each.values }));
    },
    async leftovers() {
      return system.unfinished().map((each) => `${each.id} ${each.status} [${each.values.join(",")}]`);
    },
    unfinished(transactionIds) {
      return transactionIds.filter((id) => {
        const status = system.transactions.get(id)?.status;
        return status === "open" || status === "prepared";
      });
    },
    injectCommitFault(fault) {
      system.commitFaults.push(fault);
    },
    async renotify(host, kind, checkpointId) {
      const sink = sinks.get(host.name)?.at(-1);
      if (sink === undefined) return;
      if (kind === "complete") await sink.notifyCheckpointComplete(checkpointId);
      else await sink.notifyCheckpointAborted(checkpointId);
    },
    abortedIds(host) {
      return (sinks.get(host.name) ?? []).flatMap((sink) => sink.abortedCheckpointIds);
    },
  };
}
