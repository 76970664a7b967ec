/**
 * Parses the messages of PostgreSQL's `pgoutput` logical decoding plugin, protocol version 1
 * (PostgreSQL 10 and later): the payload of each XLogData message of a replication stream.
 * Column values stay in their text form here; {@link decodeColumnValue} types them.
 */
import { bigIntToLsn } from "./lsn.js";

/** One column of a relation message. `isKey` marks the replica identity's columns. */
export interface RelationColumn {
  readonly name: string;
  readonly typeOid: number;
  readonly typeModifier: number;
  readonly isKey: boolean;
}

/** A relation (table) as of this point in the stream: pgoutput sends one before first use and after every change of its columns. */
export interface RelationMessage {
  readonly tag: "relation";
  readonly relationId: number;
  readonly schema: string;
  readonly table: string;
  /** `d` default (primary key), `n` nothing, `f` full, `i` index. */
  readonly replicaIdentity: "d" | "n" | "f" | "i";
  readonly columns: readonly RelationColumn[];
}

/** One column of a tuple: text, SQL null, or a TOASTed value the change did not touch (not sent). */
export type TupleValue = { kind: "text"; text: string } | { kind: "null" } | { kind: "unchanged-toast" };

/** The pgoutput messages this source acts on. */
export type PgOutputMessage =
  | { readonly tag: "begin"; readonly finalLsn: string; readonly commitTime: bigint; readonly xid: number }
  | {
      readonly tag: "commit";
      readonly commitLsn: string;
      readonly endLsn: string;
      readonly commitTime: bigint;
    }
  | RelationMessage
  | { readonly tag: "insert"; readonly relationId: number; readonly newTuple: TupleValue[] }
  | {
      readonly tag: "update";
      readonly relationId: number;
      /** `key`: the replica identity's columns only (others null); `old`: the whole old row (REPLICA IDENTITY FULL). */
      readonly oldKind: "key" | "old" | undefined;
      readonly oldTuple: TupleValue[] | undefined;
      readonly newTuple: TupleValue[];
    }
  | {
      readonly tag: "delete";
      readonly relationId: number;
      readonly oldKind: "key" | "old";
      readonly oldTuple: TupleValue[];
    }
  | {
      readonly tag: "truncate";
      readonly relationIds: number[];
      readonly cascade: boolean;
      readonly restartIdentity: boolean;
    }
  | { readonly tag: "other"; readonly code: string };

class Reader {
  position = 0;
  constructor(private readonly buffer: Buffer) {}
  byte(): number {
    const value = this.buffer.readUInt8(this.position);
    this.position += 1;
    return value;
  }
  char(): string {
    return String.fromCharCode(this.byte());
  }
  int16(): number {
    const value = this.buffer.readInt16BE(this.position);
    this.position += 2;
    return value;
  }
  int32(): number {
    const value = this.buffer.readInt32BE(this.position);
    this.position += 4;
    return value;
  }
  uint32(): number {
    const value = this.buffer.readUInt32BE(this.position);
    this.position += 4;
    return value;
  }
  int64(): bigint {
    const value = this.buffer.readBigInt64BE(this.position);
    this.position += 8;
    return value;
  }
  lsn(): string {
    const value = this.buffer.readBigUInt64BE(this.position);
    this.position += 8;
    return bigIntToLsn(value);
  }
  string(): string {
    const end = this.buffer.indexOf(0, this.position);
    const value = this.buffer.toString("utf8", this.position, end);
    this.position = end + 1;
    return value;
  }
  tuple(): TupleValue[] {
    const count = this.int16();
    const values: TupleValue[] = [];
    for (let i = 0; i < count; i++) {
      const kind = this.char();
      if (kind === "n") values.push({ kind: "null" });
      else if (kind === "u") values.push({ kind: "unchanged-toast" });
      else if (kind === "t") {
        const length = this.int32();
        values.push({
          kind: "text",
          text: this.buffer.toString("utf8", this.position, this.position + length),
        });
        this.position += length;
      } else throw new Error(`pgoutput: unknown tuple column kind ${JSON.stringify(kind)}`);
    }
    return values;
  }
}

/**
 * Parses one pgoutput message.
 *
 * @example
 * ```ts
 * const message = parsePgOutputMessage(xlogData.subarray(25));
 * if (message.tag === "insert") console.log(message.newTuple);
 * ```
 */
export function parsePgOutputMessage(buffer: Buffer): PgOutputMessage {
  const reader = new Reader(buffer);
  const tag = reader.char();
  switch (tag) {
    case "B":
      return { tag: "begin", finalLsn: reader.lsn(), commitTime: reader.int64(), xid: reader.uint32() };
    case "C": {
      reader.byte(); // flags, unused
      return { tag: "commit", commitLsn: reader.lsn(), endLsn: reader.lsn(), commitTime: reader.int64() };
    }
    case "R": {
      const relationId = reader.uint32();
      const schema = reader.string();
      const table = reader.string();
      const replicaIdentity = reader.char() as RelationMessage["replicaIdentity"];
      const count = reader.int16();
      const columns: RelationColumn[] = [];
      for (let i = 0; i < count; i++) {
        const flags = reader.byte();
        columns.push({
          isKey: (flags & 1) === 1,
          name: reader.string(),
          typeOid: reader.uint32(),
          typeModifier: reader.int32(),
        });
      }
      return { tag: "relation", relationId, schema, table, replicaIdentity, columns };
    }
    case "I": {
      const relationId = reader.uint32();
      reader.char(); // 'N'
      return { tag: "insert", relationId, newTuple: reader.tuple() };
    }
    case "U": {
      const relationId = reader.uint32();
      let marker = reader.char();
      let oldKind: "key" | "old" | undefined;
      let oldTuple: TupleValue[] | undefined;
      if (marker === "K" || marker === "O") {
        oldKind = marker === "K" ? "key" : "old";
        oldTuple = reader.tuple();
        marker = reader.char(); // 'N'
      }
      return { tag: "update", relationId, oldKind, oldTuple, newTuple: reader.tuple() };
    }
    case "D": {
      const relationId = reader.uint32();
      const marker = reader.char();
      return { tag: "delete", relationId, oldKind: marker === "K" ? "key" : "old", oldTuple: reader.tuple() };
    }
    case "T": {
      const count = reader.uint32();
      const options = reader.byte();
      const relationIds: number[] = [];
      for (let i = 0; i < count; i++) relationIds.push(reader.uint32());
      return {
        tag: "truncate",
        relationIds,
        cascade: (options & 1) === 1,
        restartIdentity: (options & 2) === 2,
      };
    }
    default:
      // Origin (O), Type (Y), Message (M): nothing to emit.
      return { tag: "other", code: tag };
  }
}
