import type { Logger } from "@onceflow/core";
import { PostgresChangeDecodingError } from "./changes-errors.js";
import { decodeColumnValue } from "./column-values.js";
import { postgresMicrosToIso } from "./lsn.js";
import type { PgOutputMessage, RelationMessage, TupleValue } from "./pgoutput-messages.js";
import type { PostgresChange, PostgresRow } from "./postgres-change.js";

/** The transaction being read: what `begin` said. */
interface OpenTransaction {
  readonly commitLsn: string;
  readonly commitTime: string;
  readonly xid: number;
  changeIndex: number;
}

/**
 * Turns pgoutput messages into {@link PostgresChange} records, keeping the relation (table shape)
 * that each relation message announces.
 *
 * The schema-change rule: pgoutput sends a relation message before the first change of a table on
 * each connection and again before the first change written after its columns changed (ALTER TABLE
 * ADD/DROP/RENAME COLUMN, ALTER TYPE). Each tuple is decoded with the latest relation message for
 * its table, so every record carries the columns its row had when it was committed; a changed
 * shape is logged as a warning naming the columns added and removed. A tuple whose column count
 * does not match its relation, or a change for a table no relation message announced, is a
 * {@link PostgresChangeDecodingError}: never a guessed row.
 *
 * @example
 * ```ts
 * const decoder = new ChangeDecoder(logger);
 * const records = decoder.decode(parsePgOutputMessage(payload));
 * ```
 */
export class ChangeDecoder {
  private readonly relations = new Map<number, RelationMessage>();
  private transaction: OpenTransaction | undefined;

  constructor(private readonly logger: Logger) {}

  /** The transaction between `begin` and `commit`, if any. */
  get openTransaction(): Readonly<OpenTransaction> | undefined {
    return this.transaction;
  }

  /** The change records in `message` (none for begin, commit, relation and other messages). */
  decode(message: PgOutputMessage): PostgresChange[] {
    switch (message.tag) {
      case "begin":
        this.transaction = {
          commitLsn: message.finalLsn,
          commitTime: postgresMicrosToIso(message.commitTime),
          xid: message.xid,
          changeIndex: 0,
        };
        return [];
      case "commit":
        this.transaction = undefined;
        return [];
      case "relation":
        this.noteRelation(message);
        return [];
      case "insert": {
        const relation = this.relation(message.relationId);
        const after = this.row(relation, message.newTuple);
        return [this.change(relation, "insert", null, "none", after.row, after.unchanged)];
      }
      case "update": {
        const relation = this.relation(message.relationId);
        const after = this.row(relation, message.newTuple);
        const before =
          message.oldTuple === undefined
            ? null
            : this.row(relation, message.oldTuple, message.oldKind === "key").row;
        const image = message.oldKind === "old" ? "full" : message.oldKind === "key" ? "key" : "none";
        return [this.change(relation, "update", before, image, after.row, after.unchanged)];
      }
      case "delete": {
        const relation = this.relation(message.relationId);
        const before = this.row(relation, message.oldTuple, message.oldKind === "key").row;
        return [
          this.change(relation, "delete", before, message.oldKind === "old" ? "full" : "key", null, []),
        ];
      }
      case "truncate":
        return message.relationIds.map((relationId) => ({
          ...this.change(this.relation(relationId), "truncate", null, "none", null, []),
          truncate: { cascade: message.cascade, restartIdentity: message.restartIdentity },
        }));
      case "other":
        return [];
    }
  }

  private noteRelation(message: RelationMessage): void {
    const known = this.relations.get(message.relationId);
    this.relations.set(message.relationId, message);
    if (known === undefined) return;
    const shape = (relation: RelationMessage) => relation.columns.map((c) => `${c.name}:${c.typeOid}`);
    const before = shape(known);
    const after = shape(message);
    if (
      before.join(",") === after.join(",") &&
      known.table === message.table &&
      known.schema === message.schema
    )
      return;
    this.logger.warn(
      {
        table: `${message.schema}.${message.table}`,
        previousTable: `${known.schema}.${known.table}`,
        columnsAdded: after.filter((c) => !before.includes(c)),
        columnsRemoved: before.filter((c) => !after.includes(c)),
      },
      "a captured table changed its shape: changes committed from here on carry the new columns",
    );
  }

  private relation(relationId: number): RelationMessage {
    const relation = this.relations.get(relationId);
    if (relation === undefined) {
      throw new PostgresChangeDecodingError(
        `pgoutput sent a change for relation ${relationId} before any relation message for it`,
        { relationId },
      );
    }
    return relation;
  }

  private row(
    relation: RelationMessage,
    tuple: TupleValue[],
    keyOnly = false,
  ): { row: PostgresRow; unchanged: string[] } {
    if (tuple.length !== relation.columns.length) {
      throw new PostgresChangeDecodingError(
        `a change of ${relation.schema}.${relation.table} has ${tuple.length} columns but its relation message ` +
          `announced ${relation.columns.length}`,
        { relationId: relation.relationId, table: `${relation.schema}.${relation.table}` },
      );
    }
    const row: Record<string, PostgresRow[string]> = {};
    const unchanged: string[] = [];
    relation.columns.forEach((column, index) => {
      if (keyOnly && !column.isKey) return;
      const value = tuple[index] as TupleValue;
      if (value.kind === "unchanged-toast") unchanged.push(column.name);
      else row[column.name] = value.kind === "null" ? null : decodeColumnValue(column.typeOid, value.text);
    });
    return { row, unchanged };
  }

  private change(
    relation: RelationMessage,
    kind: PostgresChange["kind"],
    before: PostgresRow | null,
    beforeImage: PostgresChange["beforeImage"],
    after: PostgresRow | null,
    unchangedToastColumns: string[],
  ): PostgresChange {
    const transaction = this.transaction;
    if (transaction === undefined) {
      throw new PostgresChangeDecodingError(
        `pgoutput sent a ${kind} of ${relation.schema}.${relation.table} outside a transaction`,
        { relationId: relation.relationId },
      );
    }
    const changeIndex = transaction.changeIndex;
    transaction.changeIndex += 1;
    return {
      kind,
      schema: relation.schema,
      table: relation.table,
      before,
      beforeImage,
      after,
      unchangedToastColumns,
      commitLsn: transaction.commitLsn,
      commitTime: transaction.commitTime,
      xid: transaction.xid,
      changeIndex,
    };
  }
}
