import { parentPort, workerData } from "node:worker_threads";
import { loadPrometheusMetrics } from "../cli/load-prometheus.js";
import { isOnceflowError } from "../errors/onceflow-error.js";
import type { PrometheusMetrics } from "../observability/prometheus-metrics.js";
import { serveHostedSubtask } from "./hosted-subtask-thread.js";
import { buildThreadJob, pickJobFactory, type ThreadJob } from "./thread-job.js";
import type { FromSubtaskThread, SubtaskThreadData, ToSubtaskThread } from "./thread-messages.js";

// The entry of one subtask thread (`runSubtasksInThreads` starts one per subtask; tsup builds it to
// dist/subtask-thread.js). The thread is the per-subtask topology of `onceflow run --subtask <i>`:
// it imports the job module, builds the job with `{ subtaskIndex: i }` and executes it, so it
// claims and checkpoints its own scope exactly like a process of its own would.
// With a keyBy exchange (`hosted`), it builds the job and serves the main thread's job instead,
// which coordinates every thread (see hosted-subtask-thread.ts).

const port = parentPort;
if (port === null) throw new Error("subtask-thread runs in a worker thread started by runSubtasksInThreads");
const data = workerData as SubtaskThreadData;
const post = (message: FromSubtaskThread): void => port.postMessage(message);

let job: ThreadJob | undefined;
let metrics: PrometheusMetrics | undefined;
let stopRequested = false;

port.on("message", (message: ToSubtaskThread) => {
  if (message.type === "stop") {
    stopRequested = true;
    job?.stop();
  } else if (message.type === "metrics") {
    const json = metrics === undefined ? Promise.resolve([]) : metrics.registry.getMetricsAsJSON();
    json.then(
      (metricsJson) => post({ type: "metrics", id: message.id, json: metricsJson }),
      () => post({ type: "metrics", id: message.id, json: [] }),
    );
  }
});

async function run(): Promise<Readonly<Record<string, unknown>>> {
  const exports = (await import(data.moduleUrl)) as Record<string, unknown>;
  const factory = pickJobFactory(exports, data.exportName);
  if (data.metrics) {
    // The process's own metrics (process_*, nodejs_*) come from the main thread, once.
    metrics = await loadPrometheusMetrics(undefined, { defaultMetrics: false });
    // Every series of this thread carries its subtask, the job-level ones too: the main thread
    // merges the threads' registries, and must not add up two threads' checkpoint ids.
    metrics.registry.setDefaultLabels({ subtask: String(data.subtaskIndex) });
  }
  const built = await buildThreadJob(factory, {
    subtaskIndex: data.subtaskIndex,
    ...(data.allowNonRestoredState ? { allowNonRestoredState: true } : {}),
    ...(metrics === undefined ? {} : { metrics }),
    ...(data.restore === undefined ? {} : { restore: data.restore }),
  });
  job = built;
  if (data.hosted === true) {
    // The main thread's job coordinates this subtask: the thread serves its calls until closed.
    serveHostedSubtask(port!, built, data.statusIntervalMs, (listener) => port!.on("message", listener));
    return new Promise<never>(() => {});
  }
  const postStatus = (): void => post({ type: "status", status: built.status() });
  postStatus();
  const timer = setInterval(postStatus, data.statusIntervalMs);
  try {
    if (stopRequested) built.stop();
    const result = await built.execute();
    return typeof result === "object" && result !== null ? { ...result } : { result };
  } finally {
    clearInterval(timer);
    postStatus();
  }
}

run().then(
  (result) => {
    post({ type: "finished", result });
    // Let the thread end once the job's last handles are gone (the main thread waits a moment,
    // then terminates it: a client may leave a socket behind).
    port.unref();
  },
  (error: unknown) => {
    if (data.hosted === true) {
      post({
        type: "build-failed",
        code: isOnceflowError(error) ? error.code : "JOB_FAILED",
        message: error instanceof Error ? error.message : String(error),
      } as never);
      port.unref();
      return;
    }
    post({
      type: "failed",
      code: isOnceflowError(error) ? error.code : "JOB_FAILED",
      message: error instanceof Error ? error.message : String(error),
    });
    port.unref();
  },
);
