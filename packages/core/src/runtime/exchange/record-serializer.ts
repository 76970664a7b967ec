/**
 * Turns the records of a keyed stream into bytes and back where they cross an exchange between
 * worker threads or processes — Flink's `TypeSerializer`. Without one, records cross as structured
 * clones (`v8.serialize`), which keeps every JavaScript value as it was but costs about a
 * microsecond per record for objects holding Buffers; a serializer that knows the record's shape
 * is several times cheaper. `deserialize` gets exactly the bytes `serialize` made (a view into a
 * larger buffer: copy what you keep beyond the record, or keep the view — it is never reused).
 *
 * Keep a serializer's format stable for the life of a job: records of the exchange between
 * processes wait in the repartition topic across restarts and are read back by the next version.
 *
 * @example
 * ```ts
 * const clickSerializer: RecordSerializer<{ user: string; page: string }> = {
 *   serialize: (click) => Buffer.from(`${click.user}\n${click.page}`),
 *   deserialize: (bytes) => {
 *     const [user = "", page = ""] = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString().split("\n");
 *     return { user, page };
 *   },
 * };
 * clicks.keyBy((click) => click.user, { serializer: clickSerializer });
 * ```
 */
export interface RecordSerializer<T> {
  serialize(value: T): Uint8Array;
  deserialize(bytes: Uint8Array): T;
}

/**
 * Options of `keyBy`.
 *
 * @example
 * ```ts
 * const options: KeyByOptions<KafkaRecord<string, Buffer>> = { serializer: kafkaRecordSerializer() };
 * ```
 */
export interface KeyByOptions<T> {
  /**
   * How records cross the exchange between threads and processes (see {@link RecordSerializer});
   * structured clones when absent. Unused when the subtasks share one event loop.
   */
  readonly serializer?: RecordSerializer<T>;
}
