import { type RecordBatch, StreamOperator } from "./stream-operator.js";

/** `map`: one output per input, synchronous. */
export class MapOperator extends StreamOperator {
  constructor(
    uid: string,
    private readonly mapper: (value: unknown) => unknown,
  ) {
    super(uid);
  }

  processBatch(batch: RecordBatch): void | Promise<void> {
    const input = batch.values;
    const output = new Array<unknown>(input.length);
    const mapper = this.mapper;
    for (let index = 0; index < input.length; index++) output[index] = mapper(input[index]);
    return this.emit({ splitKey: batch.splitKey, values: output, timestamps: batch.timestamps });
  }
}

/** `filter`: keeps the records the predicate accepts. */
export class FilterOperator extends StreamOperator {
  constructor(
    uid: string,
    private readonly predicate: (value: unknown) => boolean,
  ) {
    super(uid);
  }

  processBatch(batch: RecordBatch): void | Promise<void> {
    const input = batch.values;
    const timestamps = batch.timestamps;
    const values: unknown[] = [];
    const keptTimestamps: Array<number | undefined> | undefined = timestamps ? [] : undefined;
    for (let index = 0; index < input.length; index++) {
      const value = input[index];
      if (!this.predicate(value)) continue;
      values.push(value);
      keptTimestamps?.push(timestamps?.[index]);
    }
    return this.emit({ splitKey: batch.splitKey, values, timestamps: keptTimestamps });
  }
}

/** `flatMap`: zero or more outputs per input, each with its input's timestamp. */
export class FlatMapOperator extends StreamOperator {
  constructor(
    uid: string,
    private readonly expand: (value: unknown) => Iterable<unknown>,
  ) {
    super(uid);
  }

  processBatch(batch: RecordBatch): void | Promise<void> {
    const input = batch.values;
    const timestamps = batch.timestamps;
    const values: unknown[] = [];
    const outTimestamps: Array<number | undefined> | undefined = timestamps ? [] : undefined;
    for (let index = 0; index < input.length; index++) {
      for (const value of this.expand(input[index])) {
        values.push(value);
        outTimestamps?.push(timestamps?.[index]);
      }
    }
    return this.emit({ splitKey: batch.splitKey, values, timestamps: outTimestamps });
  }
}

/** The meeting point of `union`: forwards batches from every input; watermarks combine by minimum. */
export class UnionOperator extends StreamOperator {
  processBatch(batch: RecordBatch): void | Promise<void> {
    return this.emit(batch);
  }
}
