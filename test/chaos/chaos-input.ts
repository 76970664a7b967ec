import { Kafka, logLevel } from "kafkajs";
import type { ChaosRecord } from "./fixtures/chaos-record.js";

// The chaos input: messages 0…count−1 produced into a topic while the jobs run; by default records
// keyed by one of `CHAOS_KEYS` keys (`seq` = id, so a key's records are in order).

/** How many keys the input spreads over. */
export const CHAOS_KEYS = 12;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A kafkajs client for the chaos harness (never for the jobs under test). */
export function chaosKafkaClient(brokers: readonly string[]): Kafka {
  return new Kafka({ brokers: [...brokers], clientId: "onceflow-chaos", logLevel: logLevel.NOTHING });
}

/**
 * The background producer: `done` when every record is written (or after `stop()`); `pause()`
 * holds it (for a fault).
 */
export interface BackgroundInput {
  readonly done: Promise<void>;
  /** Holds the producer; resolves once no send is in flight, so none has to ride out the fault. */
  pause(): Promise<void>;
  resume(): void;
  /** Writes no more records (a run that failed early). */
  stop(): void;
}

/** One input message: its key, its value, and its partition (by default the key's). */
export interface InputMessage {
  readonly key: string;
  readonly value: string;
  readonly partition?: number;
}

/** The default input: record `id` as a {@link ChaosRecord} keyed by one of {@link CHAOS_KEYS} keys. */
export function chaosRecordMessage(id: number): InputMessage {
  const key = `k${id % CHAOS_KEYS}`;
  const record: ChaosRecord = { id, key, seq: id };
  return { key, value: JSON.stringify(record) };
}

/**
 * Produces messages 0…count−1 (`message(id)`, by default {@link chaosRecordMessage}), about
 * `perSecond` a second, in ticks of 100 ms.
 */
export function produceInBackground(
  brokers: readonly string[],
  topic: string,
  count: number,
  perSecond: number,
  message: (id: number) => InputMessage = chaosRecordMessage,
): BackgroundInput {
  let paused = false;
  let stopped = false;
  let sending = false;
  const done = (async () => {
    const producer = chaosKafkaClient(brokers).producer({
      allowAutoTopicCreation: false,
      idempotent: true,
      maxInFlightRequests: 1,
      // Rides out a broker restart; the idempotent producer writes each record once.
      retry: { retries: 50, initialRetryTime: 200, maxRetryTime: 2000 },
    });
    await producer.connect();
    try {
      const perTick = Math.max(1, Math.round(perSecond / 10));
      for (let id = 0; id < count && !stopped; id += perTick) {
        while (paused && !stopped) await sleep(50);
        const messages = [];
        for (let next = id; next < Math.min(count, id + perTick); next++) messages.push(message(next));
        sending = true;
        try {
          await producer.send({ topic, messages });
        } finally {
          sending = false;
        }
        await sleep(100);
      }
    } finally {
      await producer.disconnect();
    }
  })();
  // A failure is the caller's when it awaits `done`, not an unhandled rejection before that.
  done.catch(() => undefined);
  return {
    done,
    pause: async () => {
      paused = true;
      // A send already under way would meet the fault: its client's own retries (a few seconds)
      // give up while a loaded machine restarts the broker, and the input would stop for good.
      while (sending) await sleep(20);
    },
    resume: () => {
      paused = false;
    },
    stop: () => {
      stopped = true;
    },
  };
}
